"""One-off GPU start-up costs of a candidate's process, paid ahead of the job by a spare sandbox:
Triton's driver, launcher and disk-cache machinery (the first launch of any Triton kernel in a
process), CUPTI's activity tracing (the kernel audit's first trace) and the default profile's
metric configuration (host-side: no GPU work). Each part is optional:
a failure here only means the job pays that cost itself."""
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


def gpu(torch):
    """{part: seconds} for the parts that were warmed."""
    warmed = {}
    x = torch.zeros(1024, device="cuda")
    if _touch is not None:
        t0 = time.monotonic()
        try:
            _touch[(1,)](x, x.numel(), BLOCK=1024)
            torch.cuda.synchronize()
            warmed["triton"] = time.monotonic() - t0
        except Exception:
            pass
    t0 = time.monotonic()
    try:
        from . import profiling
        torch.cuda.synchronize()
        rows = profiling.trace_kernels(lambda: x.add_(1), 0)
        source = (rows[0].get("source") or "cupti") if rows else "empty"
        warmed["trace:" + source] = time.monotonic() - t0
    except Exception:
        pass
    t0 = time.monotonic()
    try:  # host-side only: the default profile's metric check and config image
        from . import ncu_metrics, profiling
        counters, _ = ncu_metrics.split_launch(ncu_metrics.resolve("sol"))
        profiling.check_metrics(counters, 0)
        warmed["profile:sol"] = time.monotonic() - t0
    except Exception:
        pass
    torch.cuda.synchronize()
    return warmed
