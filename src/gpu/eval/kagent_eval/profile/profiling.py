"""GPU profiling inside the candidate's process: CUPTI kernel traces and Nsight-Compute-named metrics.

Call these from the sandboxed child that owns the CUDA context (CUPTI allows one profiling
client per process, and loading the library or calling ``available`` creates the context).

Interface (stable):

``available(device_index) -> (ok, reason)``
    ``(True, "cupti")`` when libkagent_prof loads and the range profiler can read counters here;
    ``(True, "ncu: <why not cupti>")`` when only the Nsight Compute CLI can; else
    ``(False, "ENOTSUP: <reason>")`` (CPU mode, no library and no ncu, restricted counters...).

``METRIC_SETS = {"sol": [...], "full": [...]}``
    ``full``: the 27 metrics of KernelAgent's published traces (all exist on Hopper with
    ncu 2025.3), plus ``sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active`` and
    ``gpu__time_duration.sum``. ``sol``: a cheap set for ranking (time, both speed-of-light
    figures, DRAM traffic, occupancy).

``trace_kernels(fn, device_index) -> [launch...]``
    Runs ``fn()`` once under CUPTI activity tracing (all streams) and returns every kernel launch
    in start order: ``{name, mangled, duration_ms, grid, block, registers, shared_mem,
    static_shared, dynamic_shared, shared_mem_executed, local_mem_per_thread, stream,
    start_ns, end_ns, correlation_id, device}``. Falls back to ``torch.profiler`` (fewer fields)
    when the library is missing; the rows then carry ``"source": "torch.profiler"``.

``profile(fn, metrics="full", device_index=0, replay="user") -> result``
    ``fn`` is a zero-argument callable that runs one forward pass, already warmed up (Triton
    compiled). It runs once traced, then once per profiler pass, so the forward must be
    repeatable (same launches each run, no state carried between runs). ``replay``:

    - ``"user"``: the library sweeps the L2 (read-only, 4x its size) before *every* kernel of a
      pass, as ``ncu --cache-control all`` does, so each kernel starts from clean caches;
    - ``"user-pass"``: the L2 is swept once at the start of each pass, so later kernels of a
      forward see the caches their predecessors left (the real forward's state, not ncu's);
    - ``"kernel"``: CUPTI's kernel replay (forward runs once; DRAM writes run high by the dirty
      L2 lines its memory restores leave).

    Each mode falls back to the next one in that order when it fails, except while another
    process holds the GPU's profiler (``EBUSY``): that is waited for, up to ``BUSY_WAIT_S``,
    in the same mode. Result::

        {"metrics":   {kernel_name: {metric: value}},    # published *_ncu_metrics.json shape
         "kernels":   [{...launch fields..., "metrics": {metric: value}}],  # one per launch
         "aggregate": {metric: value},   # time-weighted over the forward (counters summed)
         "total_ms":  sum of kernel durations, "passes": n, "backend": "cupti",
         "replay": "user"|"user-pass"|"kernel", "replay_sessions": forward runs while profiling,
         "ncu_max_sol_pct": max(compute SOL, memory SOL) of the aggregate (KernelAgent's figure),
         "unsupported": [metrics this GPU/CUPTI cannot collect], "profile_s": wall seconds,
         "profiler_wait_s": seconds of it waiting for another process to free the profiler,
         "first_pass_s": seconds of the first pass's start (CUPTI setting up a new profiler
         object, 0.19-0.22 s on an H200; null when nothing was replayed)}

    Values are in base units (bytes, bytes/s, ns for gpu__time_duration.sum, percent).
    ``launch__*`` statistics are derived from the kernel records, as Nsight Compute does.

``profile_any(fn, metrics, device_index, problem_path, candidate_path, job)``
    ``profile`` when CUPTI can run; else ``profile_with_ncu`` on the same job (result gets
    ``"cupti_error"``); else ``ProfilerError("ENOTSUP", ...)`` (always so in CPU mode).

``profile_with_ncu(problem_path, candidate_path, job, metrics)``
    Same result shape, ``"backend": "ncu"``, by running the Nsight Compute CLI
    (``--clock-control none``) on ``python3 -m kagent_eval.profile.ncu_target``. See ``ncu_cli``.

Errors raise ``ProfilerError(code, message)`` with ``code`` in ``ENOTSUP``, ``EPERM``,
``EINVAL``, ``ESTATE``, ``ECUDA``, ``ECUPTI``, ``EBUSY`` (another process is profiling the
GPU), ``ENCU``; ``str(err)`` is ``"CODE: message"``.
"""
import ctypes
import time

from . import ncu_cli, ncu_metrics
from .profiler_lib import load_library, ready, torch_cuda
from .ncu_metrics import METRIC_SETS  # noqa: F401  (part of this module's interface)
from .profiler_error import ProfilerError  # noqa: F401  (part of this module's interface)


def available(device_index=0):
    try:
        _, lib = ready(device_index)
        lib.call("kp_metrics_check", b"gpu__time_duration.sum")
        return True, "cupti"
    except ProfilerError as e:
        reason = str(e)
        if e.code == "ENOTSUP" and "CPU mode" in e.message:
            return False, reason
    ok, why = ncu_cli.ncu_available()
    if ok:
        return True, "ncu: " + reason
    return False, "ENOTSUP: " + reason + "; " + why


def _torch_profiler_trace(torch, fn):
    from torch.profiler import ProfilerActivity, profile as tprofile
    with tprofile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    rows = []
    for ev in prof.events():
        if getattr(ev, "device_type", None) is None or "CUDA" not in str(ev.device_type):
            continue
        if "memcpy" in ev.name.lower() or "memset" in ev.name.lower():
            continue
        dur_us = getattr(ev, "device_time", None) or getattr(ev, "cuda_time", 0.0)
        rows.append({"name": ev.name, "duration_ms": dur_us * 1e-3, "grid": None, "block": None,
                     "registers": None, "shared_mem": None, "stream": None,
                     "source": "torch.profiler"})
    return rows


def trace_kernels(fn, device_index=0):
    torch = torch_cuda(device_index)
    try:
        lib = load_library()
        lib.init(device_index)
    except ProfilerError as e:
        if e.code != "ENOTSUP":
            raise
        return _torch_profiler_trace(torch, fn)
    torch.cuda.synchronize()
    lib.call("kp_trace_begin")
    try:
        fn()
        torch.cuda.synchronize()
    finally:
        lib.call("kp_trace_end")
    return [r for r in lib.result() if r.get("kind", "kernel") == "kernel"]


# How long a profile waits for the GPU's profiler while another process holds it. Only one
# process can (docs/results/2026-11-28-gpu-e.md); the lease keeps two profiles of one GPU apart,
# but not a profile from another candidate's process asking the GPU for its counters (a spare's
# preparation, warmup.py), which holds the profiler for milliseconds.
BUSY_WAIT_S = 3.0
BUSY_POLL_S = 0.02


def when_free(fn, wait_s=BUSY_WAIT_S, waits=None):
    """fn() once more, every BUSY_POLL_S, while it raises ProfilerError EBUSY (another process
    holds the GPU's profiler), until wait_s have passed; then that error is raised. `waits`: a
    list that gets the seconds waited, where fn() succeeded after waiting."""
    deadline = time.monotonic() + wait_s
    busy_since = None
    while True:
        attempt = time.monotonic()
        try:
            result = fn()
        except ProfilerError as e:
            if e.code != "EBUSY" or time.monotonic() >= deadline:
                raise
            busy_since = attempt if busy_since is None else busy_since
            time.sleep(BUSY_POLL_S)
            continue
        if waits is not None and busy_since is not None:
            waits.append(attempt - busy_since)
        return result


_checks = {}


def check_metrics(metrics, device_index=0, wait_s=BUSY_WAIT_S, waits=None):
    """{"supported": [...], "unsupported": [...], "passes": n, "chip": name} for counter metrics.
    The answer depends only on the chip, so it is kept per process: a profile then pays neither
    the check nor (libkagent_prof keeps it too) the config image for a metric list seen before,
    and a spare sandbox pays both for the default list before its job (``warmup.py``)."""
    key = (device_index, tuple(metrics))
    if key not in _checks:
        _, lib = ready(device_index)

        def check():
            lib.call("kp_metrics_check", ",".join(metrics).encode())
            return lib.result()
        _checks[key] = when_free(check, wait_s, waits)
    return dict(_checks[key])


def prepare_set(metric_set, device_index=0):
    """check_metrics for a metric set's counters (a set's name or a list, ncu_metrics.resolve):
    what a profile of that set makes before its first pass, made ahead of it (a spare's
    preparation, warmup.py; a candidate's process before its exclusive stages,
    candidate_timing.py). CPU work, and the GPU is asked for its counters: ProfilerError EBUSY
    while another process profiles it, at once. Waiting for it (every BUSY_POLL_S, up to a
    second) prepared 25 of 27 spares instead of 8 in a pool of four workers profiling, but the
    pool got through no more jobs (docs/results/2026-11-28-gpu-e.md): the process that profiles
    then makes the preparation itself."""
    counters, _ = ncu_metrics.split_launch(ncu_metrics.resolve(metric_set))
    return check_metrics(counters, device_index, wait_s=0)


def prepare_trace(device_index=0):
    """The activity trace's one-off set-up (CUPTI's, 0.03-0.07 s on an H200), made with no kernel
    traced: host work only, so a spare makes it without its GPU's lease (warmup.py)."""
    _, lib = ready(device_index)
    lib.call("kp_trace_begin")
    lib.call("kp_trace_end")


_flushers = {}


class _L2Flush:
    """Writes back and evicts the L2 cache by reading a buffer several times its size (a read
    leaves only clean lines behind, so no write-back lands in the next kernel's counters).

    It runs inside each profiler pass, after CUPTI's own per-pass setup (which leaves dirty
    lines of its own), so its kernels are the first ranges of the pass; `kernels` says how many
    ranges to drop."""

    def __init__(self, torch, device_index):
        self.torch = torch
        props = torch.cuda.get_device_properties(device_index)
        l2 = getattr(props, "L2_cache_size", 0) or (64 << 20)
        self.buf = torch.ones(max(4 * l2, 256 << 20) // 4, dtype=torch.float32,
                              device=torch.device("cuda", device_index))
        self.kernels = len(trace_kernels(self, device_index))

    def __call__(self):
        self.buf.sum()


def _flusher(torch, device_index):
    if device_index not in _flushers:
        _flushers[device_index] = _L2Flush(torch, device_index)
    return _flushers[device_index]


# libkagent_prof's KP_REPLAY_* codes; "user" is KP_REPLAY_USER_SWEEP (ABI 2).
REPLAY_MODES = {"kernel": 0, "user-pass": 1, "user": 2}
# Tried in this order from the one asked for: each next mode needs less of CUPTI.
REPLAY_FALLBACK = ["user", "user-pass", "kernel"]


def replay_chain(replay):
    if replay not in REPLAY_MODES:
        raise ProfilerError("EINVAL", "replay must be one of %s" % sorted(REPLAY_MODES))
    return REPLAY_FALLBACK[REPLAY_FALLBACK.index(replay):]


def _replay(torch, lib, fn, counters, n_launches, replay, device_index, max_sessions, waits=None):
    """Runs the passes; returns (decoded ranges of fn's kernels only, passes, sessions, seconds of
    the first pass's start: CUPTI setting up a new profiler object,
    docs/results/2026-11-29-gpu-b.md). `waits` gets the seconds waited for a busy profiler."""
    flush = _flusher(torch, device_index) if replay == "user-pass" else None
    skip = flush.kernels if flush else 0
    # "user" puts a sweep range before each launch; the library drops those itself.
    slots = n_launches * (2 if replay == "user" else 1) + skip + 8
    when_free(lambda: lib.call("kp_profile_begin", ",".join(counters).encode(), slots,
                               REPLAY_MODES[replay]), waits=waits)
    done = ctypes.c_int(0)
    sessions, first_pass_s = 0, None
    try:
        while not done.value:
            if sessions >= max_sessions:
                raise ProfilerError("ECUPTI", "profiler still wants passes after %d runs" % sessions)
            started = time.perf_counter()
            lib.call("kp_profile_pass_begin")
            if first_pass_s is None:
                first_pass_s = time.perf_counter() - started
            try:
                if flush:
                    flush()
                fn()
                torch.cuda.synchronize()
            finally:
                lib.call("kp_profile_pass_end", ctypes.byref(done))
            sessions += 1
    finally:
        lib.call("kp_profile_end")
    decoded = lib.result()
    return decoded["ranges"][skip:], decoded["passes"], sessions, first_pass_s


def profile(fn, metrics="full", device_index=0, max_ranges=512, capability=None, replay="user"):
    started = time.perf_counter()
    torch, lib = ready(device_index)
    wanted = ncu_metrics.resolve(metrics)
    counters, launch_names = ncu_metrics.split_launch(wanted)
    launches = trace_kernels(fn, device_index)
    if len(launches) > max_ranges:
        raise ProfilerError("EINVAL", "forward launches %d kernels; max_ranges is %d"
                            % (len(launches), max_ranges))
    waits = []
    check = check_metrics(counters, device_index, waits=waits) if counters else {
        "supported": [], "unsupported": []}
    supported = check["supported"]
    ranges, passes, sessions, replay_error, first_pass_s = [], 0, 0, None, None
    modes = replay_chain(replay)
    if supported and launches:
        for mode in modes:
            try:
                ranges, passes, sessions, first_pass_s = _replay(
                    torch, lib, fn, supported, len(launches), mode, device_index, max_sessions=64,
                    waits=waits)
            except ProfilerError as e:
                if mode == modes[-1] or e.code == "EBUSY":  # busy is not the mode's failure
                    raise
                replay_error = "; ".join(filter(None, [replay_error, "%s: %s" % (mode, e)]))
                continue
            replay = mode
            if len(ranges) == len(launches):
                break
            replay_error = "; ".join(filter(None, [replay_error, "%s replay gave %d ranges for "
                                                   "%d launches" % (mode, len(ranges),
                                                                    len(launches))]))
    if capability is None:
        capability = torch.cuda.get_device_capability(device_index)
    rows = _join(launches, ranges, launch_names, capability)
    return ncu_metrics.profile_result(
        rows, passes, {"chip": check.get("chip"), "library": lib.path},
        replay_sessions=sessions, replay=replay, replay_error=replay_error, backend="cupti",
        unsupported=check["unsupported"],
        range_mismatch=len(ranges) != len(launches) if supported else False,
        profile_s=time.perf_counter() - started, profiler_wait_s=sum(waits),
        first_pass_s=first_pass_s)


def _join(launches, ranges, launch_names, capability):
    """One row per launch: the trace record plus its range's metrics. Auto ranges are numbered
    in launch order, so the i-th range is the i-th kernel of the (deterministic) forward."""
    rows = []
    for i, launch in enumerate(launches):
        row = dict(launch)
        metrics = {}
        if i < len(ranges):
            metrics.update({k: v for k, v in ranges[i]["metrics"].items() if v is not None})
        if launch_names:
            derived = ncu_metrics.launch_metrics(launch, capability)
            metrics.update({k: derived[k] for k in launch_names if k in derived})
        row["metrics"] = metrics
        rows.append(row)
    return rows


def profile_with_ncu(problem_path, candidate_path, job, metrics="full", ncu_args=()):
    return ncu_cli.profile_with_ncu(problem_path, candidate_path, job, metrics,
                                    ncu_args=ncu_args)


def profile_any(fn, metrics="full", device_index=0, problem_path=None, candidate_path=None,
                job=None):
    """CUPTI when it can run here, else the ncu CLI on the same job (needs the paths), else
    ProfilerError("ENOTSUP", reasons of both)."""
    try:
        return profile(fn, metrics, device_index)
    except ProfilerError as e:
        if e.code not in ("ENOTSUP", "EPERM") or "CPU mode" in e.message:
            raise
        cupti_error = e
    if not problem_path:
        raise cupti_error
    ok, why = ncu_cli.ncu_available()
    if not ok:
        raise ProfilerError("ENOTSUP", "%s; %s" % (cupti_error.message, why))
    res = ncu_cli.profile_with_ncu(problem_path, candidate_path, job, metrics)
    res["cupti_error"] = str(cupti_error)
    return res
