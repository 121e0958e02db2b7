"""One-off GPU start-up costs of a candidate's process, paid ahead of the job by a spare sandbox.

host(): without running anything on the GPU, so a spare prepares without its GPU's lease: Triton's
driver and launcher, the module of a small kernel compiled and loaded (not launched), CUPTI's
activity trace set up (begun and ended with no kernel), and, for a spare whose job is likely to
profile, the default profile's metric check and config image (CPU-heavy, and it asks the GPU which
counters it has, which fails while another process profiles the GPU).
on_device(): what does run on the GPU (a first Triton launch, a first traced kernel), called by
the job once it holds the lease shared. Each part is optional: a failure here only means the job
pays that cost itself."""
import time

try:
    import triton
    import triton.language as tl

    @triton.jit
    def _touch(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1, mask=mask)
except Exception:  # no Triton, or one that cannot JIT here: nothing to warm
    _touch = None


def parent():
    """In the worker, before any sandbox is forked (no CUDA): Triton's hash of its own sources
    and library (kept for the process; every candidate's first compile needs it) and the modules
    Triton imports on its first compile. Each forked process then starts with them."""
    if _touch is None:
        return
    try:
        from triton.runtime import cache
        cache.triton_key()
    except Exception:
        pass
    for name in ("triton.experimental.gluon", "triton.compiler.compiler",
                 "triton.backends.nvidia.compiler", "triton.backends.nvidia.driver"):
        try:
            __import__(name)
        except Exception:
            pass


def host(torch, profile=True):
    """{part: seconds} for the parts prepared; state for on_device() under "touch". profile=False
    leaves the profile's metric check and config image to a job that profiles (jobs.py: a spare
    prepares them when the job that started it profiled)."""
    warmed, state = {}, {}
    x = torch.empty(1024, device="cuda")  # an allocation, no kernel
    state["x"] = x
    if _touch is not None:
        t0 = time.monotonic()
        try:
            kernel = _touch.warmup(x, x.numel(), BLOCK=1024, grid=(1,))  # compiles, no launch
            getattr(kernel, "_init_handles", lambda: None)()  # loads the module
            warmed["triton"] = time.monotonic() - t0
        except Exception:
            pass
    t0 = time.monotonic()
    try:  # CUPTI's own set-up of the activity trace, else paid by the job's first traced kernel
        from ..profile import profiling
        profiling.prepare_trace(0)
        warmed["trace_setup"] = time.monotonic() - t0
    except Exception:
        pass
    if not profile:
        return warmed, state
    t0 = time.monotonic()
    try:  # the default profile's metric check and config image
        from ..profile import profiling
        profiling.prepare_set("sol", 0)
        warmed["profile:sol"] = time.monotonic() - t0
    except Exception:
        pass
    return warmed, state


def on_device(torch, state):
    """The first launch and the first traced kernel, under the lease: {part: seconds}."""
    warmed = {}
    x = state.get("x")
    if x is None:
        return warmed
    if _touch is not None:
        t0 = time.monotonic()
        try:
            _touch[(1,)](x, x.numel(), BLOCK=1024)
            torch.cuda.synchronize()
            warmed["triton_launch"] = time.monotonic() - t0
        except Exception:
            pass
    t0 = time.monotonic()
    try:
        from ..profile import profiling
        rows = profiling.trace_kernels(lambda: x.add_(1), 0)
        source = (rows[0].get("source") or "cupti") if rows else "empty"
        warmed["trace:" + source] = time.monotonic() - t0
    except Exception:
        pass
    torch.cuda.synchronize()
    return warmed
