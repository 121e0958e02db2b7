"""Which GPU kernels a call actually ran, and whether the candidate's own kernels carry the time.

Kernel records come from the PyTorch profiler (CUPTI activity underneath, every stream). A
kernel whose name marks it as ATen, cuBLAS, cuDNN, CUTLASS or another vendor library is not the
candidate's own; Triton and load_inline kernels are.
"""
import re

# names only a vendor library or ATen produces
STRONG_PATTERNS = [
    r"\bat::", r"\bc10::", r"\bat_cuda_detail\b", r"cutlass", r"cublas", r"cudnn", r"\bcub::",
    r"\bthrust::", r"^sm\d+_xmma", r"xmma_", r"^ampere_", r"^volta_", r"^turing_", r"^hopper_",
    r"^sm\d+_", r"nvjet", r"implicit_convolve", r"winograd", r"cutensor", r"flash_fwd",
    r"pytorch_flash", r"gemv2[NT]_", r"gemvNSP", r"gemmSN", r"splitKreduce", r"CatArrayBatchedCopy",
    r"RowwiseMoments", r"cunn_",
]
# words a Triton kernel may use too: library only in a C++ (templated or qualified) name
WEAK_PATTERNS = [
    r"gemm", r"gemv", r"elementwise_kernel", r"reduce_kernel", r"vectorized_elementwise",
    r"unrolled_elementwise", r"nchwToNhwc", r"nhwcToNchw", r"scalePackedTensor", r"dgrad", r"wgrad",
    r"fprop", r"softmax_warp", r"max_pool", r"avg_pool", r"conv_depthwise", r"im2col", r"col2im",
    r"vol2col", r"col2vol", r"LayerNorm", r"fft",
]
_STRONG = re.compile("|".join(STRONG_PATTERNS), re.IGNORECASE)
_WEAK = re.compile("|".join(WEAK_PATTERNS), re.IGNORECASE)
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# transfers and fills the harness or allocator may cause: not counted either way
_IGNORED = re.compile(r"^(Memcpy|Memset|\[CUDA memcpy|\[CUDA memset)", re.IGNORECASE)


def is_library_kernel(name):
    """Triton kernels are named after their Python function (a plain identifier); ATen, cuBLAS,
    cuDNN and CUTLASS kernels carry vendor prefixes or C++ namespaces and templates."""
    if _STRONG.search(name):
        return True
    if _PLAIN.fullmatch(name):
        return False
    return bool(_WEAK.search(name))


def classify(kernels, threshold=0.5):
    """kernels: [{name, time_ms, calls}] -> audit dict."""
    total = own = 0.0
    flagged = []
    for k in kernels:
        if _IGNORED.search(k["name"]):
            continue
        k["own"] = not is_library_kernel(k["name"])
        total += k["time_ms"]
        if k["own"]:
            own += k["time_ms"]
        else:
            flagged.append(k["name"])
    frac = own / total if total > 0 else 0.0
    return {"applicable": True, "own_time_frac": frac, "fallback": total > 0 and frac < threshold
            or total == 0, "flagged_kernels": flagged[:20], "kernel_time_ms": total,
            "threshold": threshold}


def kernels_of(torch, fn, calls=3):
    """Run fn under the profiler; per-kernel GPU time summed over the calls, per call."""
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    table = {}
    for evt in prof.events():
        dev_type = getattr(evt, "device_type", None)
        if dev_type is None or "CUDA" not in str(dev_type):
            continue
        t_us = getattr(evt, "device_time", None)
        if t_us is None:
            t_us = getattr(evt, "cuda_time", 0.0)
        rec = table.setdefault(evt.name, {"name": evt.name, "time_ms": 0.0, "calls": 0})
        rec["time_ms"] += float(t_us) / 1e3 / calls
        rec["calls"] += 1
    kernels = sorted(table.values(), key=lambda r: -r["time_ms"])
    for k in kernels:
        k["calls"] = k["calls"] / calls
    return kernels
