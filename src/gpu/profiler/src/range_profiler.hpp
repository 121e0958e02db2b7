// CUPTI range profiler in auto-range mode: one range per kernel launch, replayed by CUPTI per
// kernel or by the caller per pass (optionally with an L2 sweep before every kernel).
#pragma once

#include <cupti_profiler_host.h>
#include <cupti_range_profiler.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "device.hpp"
#include "launch_flush.hpp"

namespace kp {

// Host-side metric database for one chip: validates names, builds config images, counts passes.
class MetricHost {
public:
    MetricHost() = default;
    MetricHost(const MetricHost&) = delete;
    MetricHost& operator=(const MetricHost&) = delete;
    ~MetricHost();
    Status open(const Device& d);
    bool is_valid(const std::string& metric);
    Status build_config(const std::vector<std::string>& metrics, std::vector<uint8_t>& config,
                        size_t& passes);
    CUpti_Profiler_Host_Object* object() const { return host_; }

private:
    CUpti_Profiler_Host_Object* host_ = nullptr;
};

// A metric list made ready for one chip: its host object (which also decodes the results), its
// config image and the passes it needs. Building them costs tens of milliseconds of host time;
// the process profiles one chip with a few metric lists, so each is built once and kept.
struct PreparedMetrics {
    MetricHost host;
    std::vector<uint8_t> config;
    size_t passes = 0;
};

// The prepared form of `metrics` (all must be valid on the chip), from the cache or built now.
Status prepare_metrics(const Device& d, const std::vector<std::string>& metrics,
                       std::shared_ptr<PreparedMetrics>& out);
// Which of `metrics` the chip knows (one host object per chip, kept).
Status validate_metrics(const Device& d, const std::vector<std::string>& metrics,
                        std::vector<std::string>& ok, std::vector<std::string>& bad);
void forget_prepared_metrics();

class RangeSession {
public:
    ~RangeSession();
    Status begin(const Device& d, const std::vector<std::string>& metrics, int max_ranges,
                 int replay_mode);
    Status pass_begin();
    Status pass_end(bool& all_done);
    Status end(std::string& json);
    bool active() const { return object_ != nullptr; }
    void release();

private:
    std::shared_ptr<PreparedMetrics> prepared_;
    std::vector<std::string> metrics_;
    std::vector<uint8_t> counter_data_;
    CUpti_RangeProfiler_Object* object_ = nullptr;
    std::unique_ptr<LaunchFlush> flush_;  // KP_REPLAY_USER_SWEEP only
    std::vector<bool> sequence_;          // launches of the last pass: true for a sweep
    size_t pass_count_ = 0;
    bool in_pass_ = false;
    bool all_done_ = false;
};

std::vector<std::string> split_csv(const char* csv);

}  // namespace kp
