#!/usr/bin/env python3
"""What checking every timed call's output costs the figure: one kernel timed side by side in one
process the way the evaluator timed it before (one input set, nothing between the calls) and the
way it times it now (input sets rotating, their contents moved twice, an output sample after every
call: src/gpu/eval/README.md, "Timing"), in alternating rounds, with the all-stream trace on as in
a job.

    python3 bench/timed_output_cost.py [--dtype bf16] [--rounds 3] [--min-time 1.0]
                                       [NAME ...]   (default: the five showcase problems)

NAME is a file name in examples/problems/ with its kernel in examples/kernels/. Prints, per
problem, each method's median of round medians, their ratio (new / old) and the extra wall time
per call, and a last line with the largest deviation; writes JSON to
$OUT/timed_output_cost.json when OUT is set. Exit status 77 without a GPU.
"""
import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "src", "gpu", "eval"))
SHOWCASE = ["4_matmul_gemv", "36_rmsnorm", "43_maxpool3d", "77_conv_transpose3d",
            "82_depthwise_conv2d"]


def one_problem(torch, name, dtype_name, rounds, min_time):
    from kagent_eval.child import child_reference
    from kagent_eval.common import inputs, loader, timed_inputs, timing
    from kagent_eval.profile import profiler_lib
    dtype = loader.torch_dtype(torch, dtype_name)
    device = "cuda:0"
    problem = loader.load_module("problem_" + name, os.path.join(ROOT, "examples/problems",
                                                                 name + ".py"))
    module = loader.load_module("kernel_" + name, os.path.join(ROOT, "examples/kernels",
                                                               name + ".py"))
    init = list(problem.get_init_inputs())
    ref = loader.build_model(torch, problem.Model, init, 42, dtype, device)
    cand = loader.build_candidate(torch, module, ref, init, 42, dtype, device)
    spec = {"seed": 42, "trials": 5, "properties": False, "sample_seed": 12345}
    timer = timing.Timer(torch, device, profiler_lib.activity_trace(0))
    holder = [None]
    old_args, _ = inputs.make_inputs(torch, problem, 42, 0, dtype, device)

    def old_call():
        with torch.no_grad():
            holder[0] = cand(*old_args)

    figures = {"old": [], "new": [], "old_wall_s": [], "new_wall_s": [], "n": []}
    for _ in range(rounds):
        t0 = time.perf_counter()
        old = timer.measure(old_call, min_time=min_time)
        figures["old_wall_s"].append(time.perf_counter() - t0)
        figures["old"].append(old["median"])
        sets = timed_inputs.Rotation(torch, problem, spec, dtype, device,
                                     timed_inputs.set_trials(child_reference.trial_plan(spec)))
        sampler = timed_inputs.Sampler(torch, spec["sample_seed"])

        def new_call():
            with torch.no_grad():
                holder[0] = cand(*sets.current)

        t0 = time.perf_counter()
        new = timer.measure(new_call, min_time=min_time, feed=sets,
                            after_call=lambda i: sampler.take(holder[0]))
        figures["new_wall_s"].append(time.perf_counter() - t0)
        figures["new"].append(new["median"])
        figures["n"].append((old["n"], new["n"], len(sets.trials)))
        ok = old.get("all_streams", {}).get("ok") and new.get("all_streams", {}).get("ok")
        figures.setdefault("all_streams_ok", []).append(bool(ok))
        del sets, sampler
        torch.cuda.empty_cache()
    o, n = statistics.median(figures["old"]), statistics.median(figures["new"])
    calls_old = sum(c[0] for c in figures["n"])
    calls_new = sum(c[1] for c in figures["n"])
    figures.update(old_ms=o, new_ms=n, ratio=n / o,
                   extra_wall_ms_per_call=1e3 * (sum(figures["new_wall_s"]) / calls_new
                                                 - sum(figures["old_wall_s"]) / calls_old))
    del old_args, cand, ref
    torch.cuda.empty_cache()
    return figures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("names", nargs="*", default=SHOWCASE)
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--min-time", type=float, default=1.0)
    args = ap.parse_args()
    import torch
    if not torch.cuda.is_available():
        print("SKIP: no CUDA device here")
        return 77
    rows = {}
    print("%-22s %10s %10s %8s %14s %s" % ("problem", "old ms", "new ms", "new/old",
                                           "extra ms/call", "sets, streams ok"), flush=True)
    for name in args.names:
        f = one_problem(torch, name, args.dtype, args.rounds, args.min_time)
        rows[name] = f
        print("%-22s %10.4f %10.4f %8.4f %14.3f %s, %s" % (
            name, f["old_ms"], f["new_ms"], f["ratio"], f["extra_wall_ms_per_call"],
            f["n"][0][2], all(f["all_streams_ok"])), flush=True)
    worst = max(abs(f["ratio"] - 1.0) for f in rows.values())
    print("largest deviation of the checked figure from the unchecked: %.2f%% (%s)" % (
        100 * worst, torch.cuda.get_device_name(0)))
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "timed_output_cost.json"), "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
