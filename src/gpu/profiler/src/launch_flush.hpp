// Brings every profiled kernel to the cache state Nsight Compute gives it (`--cache-control all`):
// before each kernel launch in a user-replay pass, a read-only kernel sweeps a buffer several
// times the L2 size, so dirty lines left by the previous kernel (or by CUPTI's per-pass setup)
// are written back inside the sweep, not inside the next kernel's counters.
//
// The sweep is launched from a CUPTI API-enter callback on the launching thread, after the
// device is idle; each sweep is a range of its own, so the launch sequence (sweep or not) is
// kept to drop those ranges at decode time.
#pragma once

#include <cupti_callbacks.h>

#include <vector>

#include "device.hpp"

namespace kp {

class LaunchFlush {
public:
    ~LaunchFlush();
    // Allocates the sweep buffer, JIT-loads the sweep kernel and subscribes to launch callbacks.
    Status open(const Device& d);
    void close();
    // Sweeps run only while armed (a pass is open); the sequence restarts at each arm().
    void arm();
    void disarm() { armed_ = false; }
    // One entry per kernel launched while armed, in order: true for a sweep.
    const std::vector<bool>& sequence() const { return sequence_; }
    // First failure inside a callback (callbacks cannot return errors).
    const Status& error() const { return error_; }

    void on_launch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                   const CUpti_CallbackData* data);

private:
    void sweep();

    CUcontext ctx_ = nullptr;
    CUmodule module_ = nullptr;
    CUfunction kernel_ = nullptr;
    CUdeviceptr buffer_ = 0;
    unsigned long long vectors_ = 0;  // 16-byte loads the sweep makes
    unsigned grid_ = 0;
    long idle_us_ = 0;  // KAGENT_PROF_SWEEP_IDLE_US
    CUpti_SubscriberHandle subscriber_ = nullptr;
    bool armed_ = false;
    std::vector<bool> sequence_;
    Status error_;
};

}  // namespace kp
