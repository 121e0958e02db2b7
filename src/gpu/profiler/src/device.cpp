#include "device.hpp"

#include <cupti_profiler_target.h>
#include <cupti_target.h>

namespace kp {
namespace {

const char* level_name(CUpti_Profiler_Support_Level l) {
    switch (l) {
        case CUPTI_PROFILER_CONFIGURATION_SUPPORTED: return "supported";
        case CUPTI_PROFILER_CONFIGURATION_DISABLED: return "disabled";
        case CUPTI_PROFILER_CONFIGURATION_UNSUPPORTED: return "unsupported";
        default: return "unknown";
    }
}

// Names each failing feature, so "ENOTSUP" tells the user what to change (vGPU, WSL, ...).
Status check_support(CUdevice dev) {
    CUpti_Profiler_DeviceSupported_Params p = {CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE};
    p.cuDevice = dev;
    p.api = CUPTI_PROFILER_RANGE_PROFILING;
    KP_CUPTI(cuptiProfilerDeviceSupported(&p));
    if (p.isSupported == CUPTI_PROFILER_CONFIGURATION_SUPPORTED) return Status::Ok();
    std::string why = "CUPTI range profiling is not supported on this device:";
    auto add = [&](const char* what, CUpti_Profiler_Support_Level l) {
        if (l != CUPTI_PROFILER_CONFIGURATION_SUPPORTED)
            why += std::string(" ") + what + "=" + level_name(l);
    };
    add("architecture(needs sm_70+)", p.architecture);
    add("sli", p.sli);
    add("vgpu", p.vGpu);
    add("confidential_compute", p.confidentialCompute);
    add("cmp", p.cmp);
    add("wsl", p.wsl);
    return Status::Fail(KP_ENOTSUP, why);
}

}  // namespace

Status device_init(int index, Device& d) {
    KP_CUDA(cuInit(0));
    int count = 0;
    KP_CUDA(cuDeviceGetCount(&count));
    if (index < 0 || index >= count)
        return Status::Fail(KP_EINVAL, "kp_init: device " + std::to_string(index) + " of " +
                                           std::to_string(count) + " visible devices");
    d.index = index;
    KP_CUDA(cuDeviceGet(&d.dev, index));

    // Prefer the caller's context (torch's primary context, made current on this thread), so the
    // profiler sees the kernels the forward launches.
    CUcontext cur = nullptr;
    cuCtxGetCurrent(&cur);
    CUdevice cur_dev = -1;
    if (cur && cuCtxGetDevice(&cur_dev) == CUDA_SUCCESS && cur_dev == d.dev) {
        d.ctx = cur;
    } else {
        KP_CUDA(cuDevicePrimaryCtxRetain(&d.ctx, d.dev));
        d.retained_primary = true;
        KP_CUDA(cuCtxSetCurrent(d.ctx));
    }
    return Status::Ok();
}

// Apart from device_init: the activity trace needs the context only, and the profiler's
// initialization can fail while other processes on the GPU set up theirs, which must not leave a
// timing without its all-stream trace.
// A failed attempt is tried again by the next call.
Status profiler_init(Device& d) {
    if (d.profiler_ready) return Status::Ok();
    if (!d.profiler_initialized) {
        CUpti_Profiler_Initialize_Params init = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
        KP_CUPTI(cuptiProfilerInitialize(&init));
        d.profiler_initialized = true;  // from here kp_shutdown de-initializes it
    }
    KP_TRY(check_support(d.dev));

    CUpti_Device_GetChipName_Params chip = {CUpti_Device_GetChipName_Params_STRUCT_SIZE};
    chip.deviceIndex = static_cast<size_t>(d.index);
    KP_CUPTI(cuptiDeviceGetChipName(&chip));
    d.chip = chip.pChipName ? chip.pChipName : "";

    CUpti_Profiler_GetCounterAvailability_Params avail = {
        CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE};
    avail.ctx = d.ctx;
    KP_CUPTI(cuptiProfilerGetCounterAvailability(&avail));
    d.counter_availability.assign(avail.counterAvailabilityImageSize, 0);
    avail.pCounterAvailabilityImage = d.counter_availability.data();
    KP_CUPTI(cuptiProfilerGetCounterAvailability(&avail));
    d.profiler_ready = true;
    return Status::Ok();
}

void device_release(Device& d) {
    if (d.retained_primary) cuDevicePrimaryCtxRelease(d.dev);
    d = Device{};
}

}  // namespace kp
