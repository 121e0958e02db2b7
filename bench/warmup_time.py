#!/usr/bin/env python3
"""How long the warm-up before a timed loop must be: each problem's median (the default stop
rule) after warm-ups of several lengths, as a candidate's process takes it, side by side.

    PYTHONPATH=src/gpu/eval python3 bench/warmup_time.py [--warmups 0.1,0.025,0.1]
        [--gaps 0,0.5] [--kb-dir /work/shared/data/kernelbench/level1] [--only 19,23]
        [--json FILE]

A candidate's process warms up (bench.warmup_time seconds of calls, at least bench.warmup calls)
while the lease is shared, waits at the exclusive gate (no wait with one worker per GPU; about
half a second at four), then makes one call and times the loop. Here, for each of
bench/adaptive_timing.py's problems (the five showcase problems in bf16, twenty KernelBench
level-1 references), in one process: the GPU left idle for a second (a compile, a slow input),
the warm-up of each length, the gap of each length, one call, the timed loop, for every warm-up
and gap, the order turned round from problem to problem. Prints each problem's medians and their
ratios to the first warm-up's at the same gap (the baseline given again: the noise between two
runs alike); the rule: within 1%. Last line: RESULT PASS or FAIL. Exit: 0 pass, 1 fail, 77
without CUDA. What it says holds for a candidate's timing, not for the compare op, whose blocks
start right after the warm-up (it keeps its own: interleave.WARMUP_S).
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import adaptive_timing  # noqa: E402 (the problems, and where to find them)

IDLE_S = 1.0  # the GPU left idle before each warm-up


def one_problem(torch, timer, name, path, dtype_name, warmups, gaps, reverse):
    from kagent_eval.common import inputs, loader
    dtype = loader.torch_dtype(torch, dtype_name)
    problem = loader.load_module("problem_" + name, path)
    model = loader.build_model(torch, problem.Model, list(problem.get_init_inputs()), 42, dtype,
                               "cuda:0")
    args, _ = inputs.make_inputs(torch, problem, 42, 0, dtype, "cuda:0")

    def fn():
        with torch.no_grad():
            model(*args)
    runs = [(i, w, g) for g in gaps for i, w in enumerate(warmups)]
    if reverse:
        runs.reverse()
    medians = {}
    try:
        fn()
        torch.cuda.synchronize()
        for i, w, g in runs:
            time.sleep(IDLE_S)
            timer.warm(fn, 3, w)
            time.sleep(g)
            loop = timer.measure(fn, warmup=1, warmup_time=0.0)
            medians[key(i, w, g)] = loop["median"]
    finally:
        del model, args
        torch.cuda.empty_cache()
    row = {"problem": name, "dtype": dtype_name, "medians": medians, "ratios": {}}
    for g in gaps:
        base = medians[key(0, warmups[0], g)]
        for i, w in enumerate(warmups[1:], 1):
            row["ratios"][key(i, w, g)] = medians[key(i, w, g)] / base
    return row


def key(i, warmup, gap):
    """A run's name: its warm-up's place in --warmups (one length may come twice: the second
    time it is the baseline's noise), the warm-up and the gap."""
    return "%d:%g/%g" % (i, warmup, gap)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--warmups", default="0.1,0.025,0.1",
                    help="seconds; the first is the baseline; given again, it measures the noise")
    ap.add_argument("--gaps", default="0,0.5", help="seconds idle between warm-up and loop")
    ap.add_argument("--kb-dir", default="/work/shared/data/kernelbench/level1")
    ap.add_argument("--only", default=None, help="comma-separated names or level-1 ids")
    ap.add_argument("--dtype", default="fp32", help="dtype of the level-1 problems")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    warmups = [float(x) for x in a.warmups.split(",")]
    gaps = [float(x) for x in a.gaps.split(",")]
    if len(warmups) < 2:
        ap.error("--warmups needs a baseline and at least one length to compare with it")
    import torch
    if not torch.cuda.is_available():
        print("SKIP: no CUDA device")
        return 77
    torch.cuda.set_device(0)
    from kagent_eval.child import child_common
    timer = child_common.timer(torch, "cuda:0")
    cases = adaptive_timing.problems(a.kb_dir, a.dtype, a.only)
    rows, t0 = [], time.perf_counter()
    for k, (name, path, dtype) in enumerate(cases):
        try:
            row = one_problem(torch, timer, name, path, dtype, warmups, gaps, k % 2 == 1)
        except Exception as e:  # one problem's failure (out of memory...) is reported, not fatal
            row = {"problem": name, "dtype": dtype, "error": "%s: %s" % (type(e).__name__,
                                                                       str(e)[:200])}
        rows.append(row)
        print(json.dumps(row), flush=True)

    keys = [key(i, w, g) for g in gaps for i, w in enumerate(warmups) if i > 0]
    print("\ndevice: %s, %d problems in %.0f s; ratio = median after warm-up w, gap g, over the "
          "median after %g s, same gap" % (torch.cuda.get_device_name(0), len(rows),
                                            time.perf_counter() - t0, warmups[0]))
    print("%-44s %5s %10s  %s" % ("problem", "dtype", "base ms", "  ".join(
        "%12s" % k for k in keys)))
    bad, errors = [], []
    for r in rows:
        if "error" in r:
            errors.append(r["problem"])
            print("%-44s %5s  error: %s" % (r["problem"][:44], r["dtype"], r["error"]))
            continue
        off = [k for k in keys if abs(r["ratios"][k] - 1.0) > adaptive_timing.AGREE]
        if off:
            bad.append(r["problem"])
        print("%-44s %5s %10.4f  %s%s" % (
            r["problem"][:44], r["dtype"], r["medians"][key(0, warmups[0], gaps[0])],
            "  ".join("%12.4f" % r["ratios"][k] for k in keys), "  <- disagree" if off else ""))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"warmups": warmups, "gaps": gaps, "rows": rows}, f, indent=1)
    ok = not bad and not errors
    print("RESULT %s: %d of %d problems within %.0f%% of the %g s warm-up at every gap%s%s" % (
        "PASS" if ok else "FAIL", len(rows) - len(bad) - len(errors), len(rows),
        adaptive_timing.AGREE * 100, warmups[0], " (disagree: %s)" % ", ".join(bad) if bad else "",
        "; errors: %s" % ", ".join(errors) if errors else ""))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
