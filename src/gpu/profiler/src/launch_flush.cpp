#include "launch_flush.hpp"

#include <cupti.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

namespace kp {
namespace {

// Hand-written PTX so the library needs no device compiler; the driver JITs it once per session.
// Loads are XOR-folded and the result stored only if it equals a value a zero-filled buffer
// cannot give, so the loads cannot be optimized away and the sweep writes nothing.
const char kSweepPtx[] = R"(
.version 7.0
.target sm_75
.address_size 64
.visible .entry kp_l2_sweep(.param .u64 buf, .param .u64 n16)
{
    .reg .pred p;
    .reg .b32 r<12>;
    .reg .b64 rd<10>;
    ld.param.u64 rd1, [buf];
    ld.param.u64 rd2, [n16];
    mov.u32 r1, %ctaid.x;
    mov.u32 r2, %ntid.x;
    mov.u32 r3, %tid.x;
    mov.u32 r4, %nctaid.x;
    mul.wide.u32 rd3, r1, r2;
    cvt.u64.u32 rd4, r3;
    add.u64 rd3, rd3, rd4;
    mul.wide.u32 rd5, r4, r2;
    mov.u32 r5, 0;
LOOP:
    setp.ge.u64 p, rd3, rd2;
    @p bra DONE;
    shl.b64 rd6, rd3, 4;
    add.u64 rd6, rd1, rd6;
    ld.global.v4.u32 {r6, r7, r8, r9}, [rd6];
    xor.b32 r5, r5, r6;
    xor.b32 r5, r5, r7;
    xor.b32 r5, r5, r8;
    xor.b32 r5, r5, r9;
    add.u64 rd3, rd3, rd5;
    bra LOOP;
DONE:
    setp.ne.u32 p, r5, 1592923700;
    @p ret;
    st.global.u32 [rd1], r5;
    ret;
}
)";

// Launch entry points of both APIs. The runtime calls into the driver, so a runtime launch
// sweeps once and the driver callbacks nested in it are skipped (depth counter below).
const CUpti_CallbackId kRuntimeLaunches[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,
    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000,
};
const CUpti_CallbackId kDriverLaunches[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
};

// Diagnostic knobs, read when a profile session opens, for studying how the cache state before
// a kernel moves its metrics: sweep size in MiB, and host-side idle time after each sweep (the
// device sits idle, as it does between Nsight Compute's passes). Unset: the defaults.
long env_long(const char* name, long fallback) {
    const char* v = std::getenv(name);
    if (!v || !*v) return fallback;
    char* end = nullptr;
    long n = std::strtol(v, &end, 10);
    return (end && *end == '\0' && n >= 0) ? n : fallback;
}

thread_local int t_runtime_depth = 0;
thread_local bool t_in_sweep = false;

void CUPTIAPI on_callback(void* user, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                          const void* data) {
    static_cast<LaunchFlush*>(user)->on_launch(domain, cbid,
                                               static_cast<const CUpti_CallbackData*>(data));
}

}  // namespace

LaunchFlush::~LaunchFlush() { close(); }

Status LaunchFlush::open(const Device& d) {
    ctx_ = d.ctx;
    int l2 = 0, sms = 0;
    KP_CUDA(cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, d.dev));
    KP_CUDA(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d.dev));
    size_t bytes = std::max<size_t>(4 * static_cast<size_t>(l2), 256u << 20);
    long mib = env_long("KAGENT_PROF_SWEEP_MB", 0);
    if (mib > 0) bytes = static_cast<size_t>(mib) << 20;
    idle_us_ = env_long("KAGENT_PROF_SWEEP_IDLE_US", 0);
    KP_CUDA(cuModuleLoadData(&module_, kSweepPtx));
    KP_CUDA(cuModuleGetFunction(&kernel_, module_, "kp_l2_sweep"));
    KP_CUDA(cuMemAlloc(&buffer_, bytes));
    KP_CUDA(cuMemsetD8(buffer_, 0, bytes));
    KP_CUDA(cuCtxSynchronize());
    vectors_ = bytes / 16;
    grid_ = static_cast<unsigned>(std::max(sms, 1) * 4);
    KP_CUPTI(cuptiSubscribe(&subscriber_, on_callback, this));
    for (CUpti_CallbackId id : kRuntimeLaunches)
        KP_CUPTI(cuptiEnableCallback(1, subscriber_, CUPTI_CB_DOMAIN_RUNTIME_API, id));
    for (CUpti_CallbackId id : kDriverLaunches)
        KP_CUPTI(cuptiEnableCallback(1, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API, id));
    return Status::Ok();
}

void LaunchFlush::close() {
    armed_ = false;
    if (subscriber_) {
        cuptiUnsubscribe(subscriber_);
        subscriber_ = nullptr;
    }
    if (buffer_) {
        cuMemFree(buffer_);
        buffer_ = 0;
    }
    if (module_) {
        cuModuleUnload(module_);
        module_ = nullptr;
    }
}

void LaunchFlush::arm() {
    sequence_.clear();
    armed_ = true;
}

void LaunchFlush::sweep() {
    t_in_sweep = true;
    void* args[] = {&buffer_, &vectors_};
    // Idle device first: the kernel being launched may be on any stream, and whatever ran
    // before it must have left the L2 before the sweep starts.
    Status s = from_cuda(cuCtxSynchronize(), "sweep: cuCtxSynchronize");
    if (s.ok())
        s = from_cuda(cuLaunchKernel(kernel_, grid_, 1, 1, 512, 1, 1, 0, nullptr, args, nullptr),
                      "sweep: cuLaunchKernel");
    if (s.ok()) s = from_cuda(cuCtxSynchronize(), "sweep: cuCtxSynchronize");
    if (s.ok() && idle_us_ > 0) std::this_thread::sleep_for(std::chrono::microseconds(idle_us_));
    t_in_sweep = false;
    if (!s.ok() && error_.ok()) error_ = s;
    if (s.ok()) sequence_.push_back(true);
}

void LaunchFlush::on_launch(CUpti_CallbackDomain domain, CUpti_CallbackId,
                            const CUpti_CallbackData* data) {
    if (t_in_sweep) return;
    bool enter = data->callbackSite == CUPTI_API_ENTER;
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
        if (!enter) {
            if (t_runtime_depth > 0) --t_runtime_depth;
            return;
        }
        if (t_runtime_depth++ > 0) return;
    } else if (!enter || t_runtime_depth > 0) {
        return;
    }
    if (!armed_ || !error_.ok()) return;
    CUcontext cur = nullptr;
    if (cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur != ctx_) return;  // another device's launch
    sweep();
    sequence_.push_back(false);
}

}  // namespace kp
