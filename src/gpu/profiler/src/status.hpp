// Error reporting shared by the library's parts: a code for the C ABI plus a message that says
// which call failed and why, so the evaluator can put it in a job result verbatim.
#pragma once

#include <cuda.h>
#include <cupti.h>

#include <string>

#include "kagent_prof.h"

namespace kp {

struct Status {
    int code = KP_OK;
    std::string message;
    bool ok() const { return code == KP_OK; }
    static Status Ok() { return {}; }
    static Status Fail(int code, std::string message) { return {code, std::move(message)}; }
};

inline Status from_cupti(CUptiResult r, const char* what) {
    if (r == CUPTI_SUCCESS) return Status::Ok();
    const char* text = nullptr;
    cuptiGetResultString(r, &text);
    std::string msg = std::string(what) + ": " + (text ? text : "unknown CUPTI error");
    int code = KP_ECUPTI;
    if (r == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES) {
        code = KP_EPERM;
        msg += " (GPU performance counters are restricted to admin users on this machine)";
    } else if (r == CUPTI_ERROR_HARDWARE_BUSY) {
        code = KP_EBUSY;
        msg += " (another process is profiling this GPU)";
    } else if (r == CUPTI_ERROR_INVALID_METRIC_NAME) {
        code = KP_EINVAL;
    } else if (r == CUPTI_ERROR_NOT_SUPPORTED || r == CUPTI_ERROR_NOT_COMPATIBLE ||
               r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
        code = KP_ENOTSUP;
    }
    return Status::Fail(code, std::move(msg));
}

inline Status from_cuda(CUresult r, const char* what) {
    if (r == CUDA_SUCCESS) return Status::Ok();
    const char* text = nullptr;
    cuGetErrorString(r, &text);
    return Status::Fail(KP_ECUDA, std::string(what) + ": " + (text ? text : "unknown CUDA error"));
}

}  // namespace kp

#define KP_TRY(expr)                         \
    do {                                     \
        ::kp::Status kp_status_ = (expr);    \
        if (!kp_status_.ok()) return kp_status_; \
    } while (0)

#define KP_CUPTI(call) KP_TRY(::kp::from_cupti((call), #call))
#define KP_CUDA(call) KP_TRY(::kp::from_cuda((call), #call))
