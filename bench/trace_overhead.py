#!/usr/bin/env python3
"""What the all-stream trace does to a timed loop: one kernel timed with the evaluator's Timer
with no trace and with it, in one process, side by side (plain, traced, plain again).

    python3 bench/trace_overhead.py [--reps 1000] [--showcase]

Kernels: the one-pass softmax of the trust checks (about 50 us on an H100) and the ReLU fixture
(256 MB, about 0.2 ms), fp32; with --showcase, the five showcase problems in bf16 too, each as
eager PyTorch and as its example kernel (examples/). For each: median, p10, p90, the share of calls slower than 1.2 x p10,
where in the loop those calls fall (ten bins), and the all-stream check's verdict.
Prints a table; writes JSON to $OUT/trace_overhead.json when OUT is set.
"""
import argparse
import json
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "src", "gpu", "eval"))

CASES = [("softmax_onepass", "tests/fixtures/trust/softmax_problem.py",
          "tests/fixtures/trust/softmax_onepass.py"),
         ("relu_triton", "tests/fixtures/eval/gpu_relu_problem.py",
          "tests/fixtures/eval/gpu_relu_triton.py")]
SHOWCASE = ["4_matmul_gemv", "36_rmsnorm", "43_maxpool3d", "77_conv_transpose3d",
            "82_depthwise_conv2d"]


def series(events):
    p10 = sorted(events)[len(events) // 10]
    slow = [i for i, e in enumerate(events) if e > 1.2 * p10]
    bins = [0] * 10
    for i in slow:
        bins[i * 10 // len(events)] += 1
    return {"slow_share": len(slow) / len(events), "slow_bins": bins, "first_slow": slow[:8]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--showcase", action="store_true")
    args = ap.parse_args()
    import torch
    if not torch.cuda.is_available():
        print("SKIP: no CUDA device here")
        return 77
    from kagent_eval.common import inputs, loader, timing
    from kagent_eval.profile import profiler_lib
    rows = []
    cases = [(n, p, c, torch.float32) for n, p, c in CASES]
    if args.showcase:
        for name in SHOWCASE:
            prob = "examples/problems/%s.py" % name
            cases += [(name + " eager", prob, None, torch.bfloat16),
                      (name, prob, "examples/kernels/%s.py" % name, torch.bfloat16)]
    for name, prob_path, cand_path, dtype in cases:
        problem = loader.load_module("problem", os.path.join(ROOT, prob_path))
        init = list(problem.get_init_inputs())
        ref = loader.build_model(torch, problem.Model, init, 42, dtype, "cuda:0")
        cand = ref
        if cand_path:
            module = loader.load_module("candidate", os.path.join(ROOT, cand_path))
            cand = loader.build_candidate(torch, module, ref, init, 42, dtype, "cuda:0")
        xs, _ = inputs.make_inputs(torch, problem, 42, 0, dtype, "cuda:0")

        def fn():
            with torch.no_grad():
                return cand(*xs)
        fn()
        tracer = profiler_lib.activity_trace(0)
        for label, tr in (("plain", None), ("traced", tracer), ("plain_again", None)):
            timer = timing.Timer(torch, "cuda:0", tr)
            events = []
            orig = timer.time_once

            def spy(f, mark=None):
                e, w = orig(f, mark)
                events.append(e)
                return e, w
            timer.time_once = spy
            res = timer.measure(fn, reps=args.reps)
            events = events[-args.reps:]
            row = {"kernel": name, "mode": label, "median": res["median"], "p10": res["p10"],
                   "p90": res["p90"], "spread": res["spread"], "pad_ms": res["pad_ms"],
                   "all_streams": res.get("all_streams")}
            row.update(series(events))
            rows.append(row)
            s = res.get("all_streams") or {}
            print("%-26s %-12s median %.4f p10 %.4f p90 %.4f spread %.3f pad %.3f slow %.0f%% %s "
                  "| check ok=%s escaped=%s outside=%s max_unc=%s" % (
                      name, label, res["median"], res["p10"], res["p90"], res["spread"],
                      res["pad_ms"], 100 * row["slow_share"], row["slow_bins"], s.get("ok"),
                      s.get("escaped_calls"), s.get("outside_windows"), s.get("max_uncovered_ms")),
                  flush=True)
        del xs, cand, ref
        torch.cuda.empty_cache()
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "trace_overhead.json"), "w") as f:
            json.dump(rows, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
