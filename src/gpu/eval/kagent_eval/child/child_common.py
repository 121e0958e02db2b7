"""Set-up shared by the sandboxed children (reference and candidate)."""
import os

SHARED, EXCLUSIVE = "shared", "exclusive"


def setup_torch(device, threads):
    import torch
    if threads:
        torch.set_num_threads(threads)
    if device.startswith("cuda"):
        torch.cuda.set_device(torch.device(device))
        torch.cuda.init()
    return torch


# A process waiting at a gate gives back the GPU memory PyTorch caches for it only while less
# than this share of the GPU's memory is free. Large frees and allocations are driver calls that
# the host's other GPUs wait on (docs/results/2026-11-28-gpu-d.md), and a timed stage that
# allocates again pays for them under the exclusive lease; giving back at every gate cost four
# workers on one GPU throughput (docs/results/2026-11-28-gpu-f.md).
GIVE_BACK_BELOW_FREE = 0.2


def gate(state, mode):
    """Stops until the worker holds this process's GPU lease in `mode` ("shared" or "exclusive";
    lease.py). Only a spare sandbox has a gate; a process forked on demand runs under a lease the
    worker holds for all of it. state["lease_mode"] is then the mode held (compile_gate.py gives
    a shared hold up around each Triton compile)."""
    wait = state.get("gate") if state else None
    if wait is not None:
        # from exclusive to shared the pool turns the hold shared at once: nothing is waited for
        if not (state.get("lease_mode") == EXCLUSIVE and mode == SHARED):
            give_back_memory(state)
        wait(mode)
        state["lease_mode"] = mode


def give_back_memory(state):
    """Waiting, this process keeps no GPU memory it does not use where the GPU is short of it:
    the processes of the other workers on its GPU may need it meanwhile (a worker's job is
    "shared_device"). Only while it holds the lease, before it gives it up: a large free beside
    another worker's exclusive stage slows that stage's driver calls (three processes freeing
    8 GiB in a loop made a profile 9 times slower, docs/results/2026-11-29-gpu-b.md), so a process
    that holds no lease (after a compile, or a spare at its first gate) frees nothing."""
    if state.get("lease_mode") is None or not state.get("empty_cache_at_gates"):
        return
    if gpu_memory_short(state["torch"]):
        state["torch"].cuda.empty_cache()


def gpu_memory_short(torch):
    """Whether less than GIVE_BACK_BELOW_FREE of the current GPU's memory is free, counting every
    process's use; where that cannot be read, it is taken to be short."""
    try:
        free, total = torch.cuda.mem_get_info()
    except Exception:
        return True
    return free < GIVE_BACK_BELOW_FREE * total


# The baselines are PyTorch's own code, run by the trusted reference child: nothing there can put
# work outside the events, and the activity trace is not free for every kernel (with it on, the
# cuDNN depthwise convolution of showcase #82 ran 2.60 ms instead of 2.51 on an H100:
# docs/results/2026-11-26-verdicts.md), so they are timed without it.
BASELINES_UNTRACED = "baselines are the reference's own code, timed without the activity trace"


def timer(torch, device, traced=True, calibrate=True):
    """The timer of a sandboxed child, with the all-stream activity trace
    (``profiler_lib.ActivityTrace``) on a GPU; where the trace cannot be had, the timer says why in
    every timing it summarizes (the figure is then not accepted without a re-measure).
    traced=False: the reference child's baselines (BASELINES_UNTRACED). calibrate=False: no
    kernel runs yet (a spare, which holds no lease: timing.Timer.calibrate)."""
    from ..common.timing import Timer
    if not device.startswith("cuda"):
        return Timer(torch, device)
    if not traced:
        return Timer(torch, device, untraced=BASELINES_UNTRACED, calibrate=calibrate)
    try:
        from ..profile import profiler_lib
        return Timer(torch, device, profiler_lib.activity_trace(0), calibrate=calibrate)
    except Exception as e:
        return Timer(torch, device, untraced="%s: %s" % (type(e).__name__, str(e)[:300]),
                     calibrate=calibrate)


def sync(torch, device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def error_code(exc):
    """Classify an exception from running a kernel."""
    text = "%s: %s" % (type(exc).__name__, exc)
    low = text.lower()
    if "cuda error" in low or "illegal memory access" in low or "cudaerror" in low or (
            "misaligned address" in low) or "device-side assert" in low:
        return "ECUDA"
    return "ERUN"


def storage_span(torch, t):
    """[start, end) bytes of the storage a tensor lives in, to detect aliasing."""
    try:
        st = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
        start = st.data_ptr()
        size = st.nbytes() if hasattr(st, "nbytes") else st.size() * t.element_size()
        return (t.device.type, start, start + max(1, size))
    except Exception:
        start = t.data_ptr()
        return (t.device.type, start, start + max(1, t.numel() * t.element_size()))


def overlaps(a, b):
    return a[0] == b[0] and a[1] < b[2] and b[1] < a[2]


def thread_count():
    import threading
    return threading.active_count()


def env_int(name, default):
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default
