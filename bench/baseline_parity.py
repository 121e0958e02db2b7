#!/usr/bin/env python3
"""Why a baseline's time differs from triton.testing.do_bench: one problem's eager (and
torch.compile) forward timed several ways in one process, side by side.

    python3 bench/baseline_parity.py examples/problems/77_conv_transpose3d.py [--dtype bf16]
        [--compile] [--reps 50] [--long SECONDS]

Methods: the evaluator's Timer (flush, launch pad, events, device sync per call; with and
without the all-stream trace), do_bench mean and median, back-to-back calls with a flush between
them and no sync (do_bench's shape, our flush), and the kernels of one call from the activity
trace: their count, the GPU-busy time (union of kernel intervals) and the idle gaps inside the
call, which is where a per-call sync and a launch-bound forward part ways.
Prints a table; writes JSON to $OUT/baseline_parity_<name>.json when OUT is set.
"""
import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "src", "gpu", "eval"))


def back_to_back(torch, timer, fn, reps):
    """do_bench's shape with the evaluator's flush: events around each call, no sync between."""
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    torch.cuda.synchronize()
    for i in range(reps):
        timer.flush()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return sorted(s.elapsed_time(e) for s, e in zip(starts, ends))


def one_call_kernels(profiler_lib, torch, fn):
    tr = profiler_lib.activity_trace(0)
    torch.cuda.synchronize()
    tr.begin()
    fn()
    torch.cuda.synchronize()
    recs = sorted(tr.end(), key=lambda r: r["start_ns"])
    if not recs:
        return {}
    span = (max(r["end_ns"] for r in recs) - recs[0]["start_ns"]) * 1e-6
    busy, cur_s, cur_e = 0.0, None, None
    for r in recs:
        if cur_e is None or r["start_ns"] > cur_e:
            if cur_e is not None:
                busy += (cur_e - cur_s) * 1e-6
            cur_s, cur_e = r["start_ns"], r["end_ns"]
        else:
            cur_e = max(cur_e, r["end_ns"])
    busy += (cur_e - cur_s) * 1e-6
    names = {}
    for r in recs:
        names[r["name"][:80]] = names.get(r["name"][:80], 0) + 1
    return {"records": len(recs), "span_ms": span, "busy_ms": busy, "idle_ms": span - busy,
            "kinds": sorted({r.get("kind") for r in recs}), "names": names}


def long_loop(torch, timer, fn, seconds, do_bench):
    """The evaluator's per-call timing over `seconds` of calls (a job's timed loop lasts about a
    second): does the figure move between the loop's start and its end?"""
    before = do_bench(fn, warmup=25, rep=100, return_mode="mean")
    timer.fit_pad(fn)
    events, t_end = [], time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        events.append(timer.time_once(fn)[0])
    after = do_bench(fn, warmup=25, rep=100, return_mode="mean")
    k = max(1, len(events) // 10)
    return {"calls": len(events), "median": statistics.median(events),
            "first_tenth": statistics.median(events[:k]),
            "last_tenth": statistics.median(events[-k:]),
            "do_bench_before": before, "do_bench_after": after}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("problem")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--compile", action="store_true", help="also torch.compile (default mode)")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--long", type=float, default=0.0,
                    help="also time SECONDS of calls back to back with the evaluator's Timer and "
                         "report the median of their first and last tenth (clocks drifting over a "
                         "long loop), with do_bench before and after")
    args = ap.parse_args()
    import torch
    if not torch.cuda.is_available():
        print("SKIP: no CUDA device here")
        return 77
    from kagent_eval.common import inputs, loader, timing
    from kagent_eval.profile import profiler_lib
    from triton.testing import do_bench
    dtype = loader.torch_dtype(torch, args.dtype)
    problem = loader.load_module("problem", args.problem)
    model = loader.build_model(torch, problem.Model, list(problem.get_init_inputs()), 42, dtype,
                               "cuda:0")
    xs, _ = inputs.make_inputs(torch, problem, 42, 0, dtype, "cuda:0")
    variants = [("eager", model)]
    if args.compile:
        variants.append(("compile", torch.compile(model)))
    rows = []
    for name, m in variants:
        def fn(m=m):
            with torch.no_grad():
                return m(*xs)
        fn()
        torch.cuda.synchronize()
        traced = timing.Timer(torch, "cuda:0", profiler_lib.activity_trace(0))
        plain = timing.Timer(torch, "cuda:0")
        row = {"variant": name}
        row["timer_traced"] = traced.measure(fn, reps=args.reps)
        row["timer_plain"] = plain.measure(fn, reps=args.reps)
        row["pad_ms"] = plain.pad_ms
        plain.pad_cycles = int(timing.MAX_PAD_MS * 3 * (plain.cycles_per_ms or 0))
        plain.pad_ms = timing.MAX_PAD_MS * 3
        row["timer_pad3ms"] = timing.summarize(*zip(*[plain.time_once(fn)
                                                     for _ in range(args.reps)]), 0.0)
        b2b = back_to_back(torch, plain, fn, args.reps)
        row["back_to_back_median"] = statistics.median(b2b)
        row["back_to_back_mean"] = sum(b2b) / len(b2b)
        row["do_bench_mean"] = do_bench(fn, warmup=25, rep=100, return_mode="mean")
        row["do_bench_median"] = do_bench(fn, warmup=25, rep=100, return_mode="median")
        row["one_call"] = one_call_kernels(profiler_lib, torch, fn)
        with torch.inference_mode():
            row["do_bench_mean_inference_mode"] = do_bench(fn, warmup=25, rep=100,
                                                           return_mode="mean")
        if args.long:
            row["long"] = long_loop(torch, plain, fn, args.long, do_bench)
            lg = row["long"]
            print("%-8s long loop %.1f s, %d calls: first tenth %.4f, last tenth %.4f (%+.1f%%), all "
                  "%.4f | do_bench mean before %.4f after %.4f" % (
                      name, args.long, lg["calls"], lg["first_tenth"], lg["last_tenth"],
                      100 * (lg["last_tenth"] / lg["first_tenth"] - 1), lg["median"],
                      lg["do_bench_before"], lg["do_bench_after"]), flush=True)
        rows.append(row)
        t, p = row["timer_traced"], row["timer_plain"]
        print("%-8s timer %.4f (traced %.4f, pad %.3f ms, p90/p10 %.3f) pad3ms %.4f | b2b med %.4f "
              "mean %.4f | do_bench mean %.4f med %.4f (inference_mode %.4f) | one call: %d "
              "records, span %.4f busy %.4f idle %.4f ms" % (
                  name, p["median"], t["median"], row["pad_ms"], p["spread"] or 0,
                  row["timer_pad3ms"]["median"], row["back_to_back_median"],
                  row["back_to_back_mean"], row["do_bench_mean"], row["do_bench_median"],
                  row["do_bench_mean_inference_mode"], row["one_call"].get("records", 0),
                  row["one_call"].get("span_ms", 0), row["one_call"].get("busy_ms", 0),
                  row["one_call"].get("idle_ms", 0)), flush=True)
        print("   kernels:", row["one_call"].get("names"), flush=True)
    out = os.environ.get("OUT")
    if out:
        name = os.path.splitext(os.path.basename(args.problem))[0]
        with open(os.path.join(out, "baseline_parity_%s.json" % name), "w") as f:
            json.dump(rows, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
