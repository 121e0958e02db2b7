"""Cost of profiling one candidate: warm in-process CUPTI profile vs the Nsight Compute CLI.

    PYTHONPATH=src/gpu/eval python3 bench/profile_cost.py PROBLEM.py [CANDIDATE.py]
        [--metrics full|sol] [--reps 5] [--dtype bf16] [--no-ncu] [--breakdown] [--pass-table]

Prints the median wall time of `profiling.profile` in a process that already holds the CUDA
context and compiled kernels, the part of it not spent running the forward (overhead beyond the
replay passes), and the wall time of `ncu --clock-control none` on the same job. --breakdown
also prints where a profile's time goes: each libkagent_prof call and each profiling step, in
seconds per profile (median over the reps). --pass-table prints the replay passes CUPTI needs for
the set, for each metric alone and for the set without each metric (what a smaller set would save).
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src", "gpu", "eval"))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("problem")
    p.add_argument("candidate", nargs="?")
    p.add_argument("--metrics", default="full")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--dtype", default="bf16")
    p.add_argument("--no-ncu", action="store_true")
    p.add_argument("--breakdown", action="store_true")
    p.add_argument("--pass-table", action="store_true")
    a = p.parse_args()
    import torch
    if not torch.cuda.is_available():
        print("SKIP: no CUDA device")
        return 77
    from kagent_eval.profile import ncu_metrics, ncu_target, profiler_lib, profiling
    if a.pass_table:
        return _pass_table(profiling, ncu_metrics, a.metrics)
    job = {"problem": a.problem, "candidate": a.candidate, "dtype": a.dtype, "device": 0}
    _, forward, _ = ncu_target.build_forward(job)
    for _ in range(3):
        forward()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(5):
        forward()
    torch.cuda.synchronize()
    fwd_s = (time.perf_counter() - t) / 5
    times, res, parts = [], None, []
    spent = _time_calls(profiling, profiler_lib) if a.breakdown else None
    for _ in range(a.reps):
        if spent is not None:
            spent.clear()
        t = time.perf_counter()
        res = profiling.profile(forward, a.metrics, 0)
        times.append(time.perf_counter() - t)
        if spent is not None:
            parts.append(dict(spent))
    med = statistics.median(times)
    runs = 1 + res["replay_sessions"]
    print("gpu: %s" % torch.cuda.get_device_name(0))
    print("cupti %s: median %.3f s over %d reps, %d passes, %d forward runs of %.2f ms, "
          "overhead beyond them %.3f s" % (a.metrics, med, a.reps, res["passes"], runs,
                                           fwd_s * 1e3, med - runs * fwd_s))
    if parts:
        names = sorted({k for p in parts for k in p}, key=lambda k: -statistics.median(p.get(k, 0) for p in parts))
        print("breakdown (s per profile, median): " + ", ".join(
            "%s %.4f" % (k, statistics.median(p.get(k, 0.0) for p in parts)) for k in names))
    if not a.no_ncu:
        t = time.perf_counter()
        profiling.profile_with_ncu(a.problem, a.candidate, job, a.metrics)
        ncu_s = time.perf_counter() - t
        print("ncu %s: %.2f s  (%.1fx the warm CUPTI profile)" % (a.metrics, ncu_s, ncu_s / med))
    return 0


def _pass_table(profiling, ncu_metrics, metrics):
    counters, _ = ncu_metrics.split_launch(ncu_metrics.resolve(metrics))
    passes = lambda names: profiling.check_metrics(names, 0)["passes"] if names else 0
    print("passes %s: %d (%d counter metrics)" % (metrics, passes(counters), len(counters)))
    for m in counters:
        print("  %-70s alone %2d   set without it %2d" % (
            m, passes([m]), passes([x for x in counters if x != m])))
    return 0


def _time_calls(profiling, profiler_lib):
    """Wraps the library's calls and the profiling steps so each adds its wall time to a dict."""
    spent = {}

    def timed(name, fn):
        def run(*args, **kw):
            t = time.perf_counter()
            try:
                return fn(*args, **kw)
            finally:
                dt = time.perf_counter() - t
                if name == "lib.kp_profile_pass_begin" and name not in spent:
                    spent[name + " (first pass)"] = dt  # CUPTI's set-up may sit in the first
                spent[name] = spent.get(name, 0.0) + dt
        return run

    call = profiler_lib.Lib.call
    profiler_lib.Lib.call = lambda self, name, *args: timed("lib." + name, call)(self, name, *args)
    result = profiler_lib.Lib.result
    profiler_lib.Lib.result = timed("lib.result (json)", result)
    for step in ("trace_kernels", "check_metrics", "_replay", "_join"):
        setattr(profiling, step, timed(step, getattr(profiling, step)))
    profiling.ncu_metrics.aggregate = timed("aggregate", profiling.ncu_metrics.aggregate)
    return spent


if __name__ == "__main__":
    sys.exit(main())
