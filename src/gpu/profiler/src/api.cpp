// The C ABI: keeps the one device binding, the last error and the last JSON result.
#include <memory>
#include <string>

#include "device.hpp"
#include "kagent_prof.h"
#include "kernel_trace.hpp"
#include "range_profiler.hpp"
#include "json_writer.hpp"

namespace {

kp::Device g_device;
bool g_ready = false;
std::unique_ptr<kp::RangeSession> g_session;
std::string g_error;
std::string g_result;

int report(const kp::Status& s) {
    g_error = s.message;
    return s.code;
}

int need_init(const char* fn) {
    if (g_ready) return KP_OK;
    return report(kp::Status::Fail(KP_ESTATE, std::string(fn) + ": call kp_init first"));
}

// kp_init binds the device only (the activity trace needs no more); the profiler is set up on
// the first call that needs it.
int need_profiler(const char* fn) {
    if (int rc = need_init(fn)) return rc;
    return report(kp::profiler_init(g_device));
}

// CUDA ties the current context to the thread; the caller may have switched it since kp_init.
int bind_context() {
    kp::Status s = kp::from_cuda(cuCtxSetCurrent(g_device.ctx), "cuCtxSetCurrent");
    return s.ok() ? KP_OK : report(s);
}

}  // namespace

extern "C" {

int kp_abi_version(void) { return 3; }

const char* kp_last_error(void) { return g_error.c_str(); }

const char* kp_result(void) { return g_result.c_str(); }

int kp_init(int device) {
    g_error.clear();
    if (g_ready && g_device.index == device) return KP_OK;
    if (g_ready) return report(kp::Status::Fail(KP_ESTATE, "kp_init: already bound to device " +
                                                               std::to_string(g_device.index)));
    kp::Status s = kp::device_init(device, g_device);
    if (!s.ok()) {
        kp::device_release(g_device);
        return report(s);
    }
    g_ready = true;
    return KP_OK;
}

int kp_trace_begin(void) {
    g_error.clear();
    if (int rc = need_init("kp_trace_begin")) return rc;
    if (int rc = bind_context()) return rc;
    return report(kp::trace_begin());
}

int kp_trace_end(void) {
    g_error.clear();
    std::string json;
    kp::Status s = kp::trace_end(json);
    if (s.ok()) g_result.swap(json);
    return report(s);
}

int kp_timestamp(unsigned long long* ns) {
    g_error.clear();
    if (!ns) return report(kp::Status::Fail(KP_EINVAL, "kp_timestamp: null pointer"));
    return report(kp::timestamp(*ns));
}

int kp_stream_id(unsigned long long stream, unsigned* id) {
    g_error.clear();
    if (!id) return report(kp::Status::Fail(KP_EINVAL, "kp_stream_id: null pointer"));
    if (int rc = need_init("kp_stream_id")) return rc;
    uint32_t value = 0;
    kp::Status s = kp::from_cupti(
        cuptiGetStreamIdEx(g_device.ctx, reinterpret_cast<CUstream>(stream), 0, &value),
        "cuptiGetStreamIdEx");
    if (s.ok()) *id = value;
    return report(s);
}

int kp_metrics_check(const char* metrics_csv) {
    g_error.clear();
    if (int rc = need_profiler("kp_metrics_check")) return rc;
    std::vector<std::string> all = kp::split_csv(metrics_csv), ok, bad;
    if (all.empty()) return report(kp::Status::Fail(KP_EINVAL, "kp_metrics_check: no metrics"));
    kp::Status s = kp::validate_metrics(g_device, all, ok, bad);
    if (!s.ok()) return report(s);
    size_t passes = 0;
    if (!ok.empty()) {
        // prepared here, the list's config is ready when kp_profile_begin asks for the same list
        std::shared_ptr<kp::PreparedMetrics> prepared;
        s = kp::prepare_metrics(g_device, ok, prepared);
        if (!s.ok()) return report(s);
        passes = prepared->passes;
    }
    std::string json = "{\"chip\":";
    kp::json_string(json, g_device.chip);
    auto list = [&](const char* key, const std::vector<std::string>& v) {
        json += ",\"";
        json += key;
        json += "\":[";
        for (size_t i = 0; i < v.size(); ++i) {
            if (i) json += ',';
            kp::json_string(json, v[i]);
        }
        json += ']';
    };
    list("supported", ok);
    list("unsupported", bad);
    json += ",\"passes\":";
    kp::json_int(json, (long long)passes);
    json += '}';
    g_result.swap(json);
    return KP_OK;
}

int kp_profile_begin(const char* metrics_csv, int max_ranges, int replay_mode) {
    g_error.clear();
    if (int rc = need_profiler("kp_profile_begin")) return rc;
    if (g_session && g_session->active())
        return report(kp::Status::Fail(KP_ESTATE, "kp_profile_begin: a session is open"));
    if (int rc = bind_context()) return rc;
    g_session = std::make_unique<kp::RangeSession>();
    kp::Status s = g_session->begin(g_device, kp::split_csv(metrics_csv), max_ranges,
                                   replay_mode);
    if (!s.ok()) g_session.reset();
    return report(s);
}

int kp_profile_pass_begin(void) {
    g_error.clear();
    if (!g_session)
        return report(kp::Status::Fail(KP_ESTATE, "kp_profile_pass_begin: no session"));
    if (int rc = bind_context()) return rc;
    return report(g_session->pass_begin());
}

int kp_profile_pass_end(int* all_passes_done) {
    g_error.clear();
    if (!g_session) return report(kp::Status::Fail(KP_ESTATE, "kp_profile_pass_end: no session"));
    bool done = false;
    kp::Status s = g_session->pass_end(done);
    if (all_passes_done) *all_passes_done = done ? 1 : 0;
    return report(s);
}

int kp_profile_end(void) {
    g_error.clear();
    if (!g_session) return report(kp::Status::Fail(KP_ESTATE, "kp_profile_end: no session"));
    std::string json;
    kp::Status s = g_session->end(json);
    g_session.reset();  // a failed decode still ends the session so the next one can start
    if (s.ok()) g_result.swap(json);
    return report(s);
}

void kp_shutdown(void) {
    g_session.reset();
    kp::forget_prepared_metrics();
    if (kp::trace_active()) {
        std::string ignored;
        kp::trace_end(ignored);
    }
    if (g_ready) {
        if (g_device.profiler_initialized) {
            CUpti_Profiler_DeInitialize_Params p = {CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE};
            cuptiProfilerDeInitialize(&p);
        }
        kp::device_release(g_device);
        g_ready = false;
    }
}

}  // extern "C"
