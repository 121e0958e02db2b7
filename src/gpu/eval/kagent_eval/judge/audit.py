"""Which GPU kernels a call actually ran, and whether the candidate's own kernels carry the time.

Kernel records come from the candidate's process (candidate_timing._kernels: CUPTI activity of
every stream, or the PyTorch profiler); this module only reads them, in the worker. A
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


# a CUDA C++ kernel the candidate defines (load_inline's cuda_sources, in its Python source)
_GLOBAL = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+"
                     r"(?:__launch_bounds__\s*\([^)]*\)\s*)?([A-Za-z_][A-Za-z0-9_]*)")
# the function's own name in a demangled kernel name: "void name<...>(...)", "name(...)"
_BASE = re.compile(r"^(?:void\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*[<(]")


def own_kernel_names(source):
    """The names of the __global__ functions a candidate's source defines."""
    return set(_GLOBAL.findall(source or ""))


def is_library_kernel(name, own_names=()):
    """Triton kernels are named after their Python function (a plain identifier); ATen, cuBLAS,
    cuDNN and CUTLASS kernels carry vendor prefixes or C++ namespaces and templates. A CUDA C++
    kernel of the candidate's own (own_names: its source's __global__ functions) is named as its
    signature demangles ("tiled_gemm(float const*, ...)"): its own unless a vendor's prefix or
    namespace marks it, whatever words ("gemm") its name uses."""
    if _STRONG.search(name):
        return True
    if _PLAIN.fullmatch(name):
        return False
    base = _BASE.match(name)
    if base and base.group(1) in own_names:
        return False
    return bool(_WEAK.search(name))


def classify(kernels, threshold=0.5, own_names=()):
    """kernels: [{name, time_ms, calls}] -> audit dict. own_names: own_kernel_names(source)."""
    total = own = 0.0
    flagged = []
    for k in kernels:
        if _IGNORED.search(k["name"]):
            continue
        k["own"] = not is_library_kernel(k["name"], own_names)
        total += k["time_ms"]
        if k["own"]:
            own += k["time_ms"]
        else:
            flagged.append(k["name"])
    frac = own / total if total > 0 else 0.0
    return {"applicable": True, "own_time_frac": frac, "fallback": total > 0 and frac < threshold
            or total == 0, "flagged_kernels": flagged[:20], "kernel_time_ms": total,
            "threshold": threshold}
