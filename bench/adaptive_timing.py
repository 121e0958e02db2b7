#!/usr/bin/env python3
"""The timed loop's stop rules side by side: the fixed second of calls (bench.stop = "time") and
the median's confidence interval (stop = "ci", the default), on the same model, inputs and
process, one after the other (the order alternates from problem to problem).

    PYTHONPATH=src/gpu/eval KAGENT_PROF_LIB=.devbuild/bin/libkagent_prof.so \
        python3 bench/adaptive_timing.py [--kb-dir /work/shared/data/kernelbench/level1]
        [--only 19,23] [--dtype fp32] [--min-time 1.0] [--json FILE]
    python3 bench/adaptive_timing.py --cpu    # the small examples on the CPU: the script's
                                              # own check, not a figure

Problems: the five showcase problems (examples/problems/, bf16 as KernelAgent's traces time
them) and twenty KernelBench level-1 references read from --kb-dir (never copied here). Each is
the reference Model's forward timed by the evaluator's Timer with its all-stream trace, as a
candidate is. Prints per problem: both medians, their ratio (the rule: within 1%), calls and the
seconds of timed calls each took (what a job holds the GPU's lease exclusive for); then a noisy
control (a GPU spin whose length varies from call to call) with the flags each method's figure
raises: the spread rule must flag it under both. Last line: RESULT PASS or FAIL.
Exit: 0 pass, 1 fail, 77 without CUDA.
"""
import argparse
import json
import os
import random
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "src", "gpu", "eval"))

SHOWCASE = ["4_matmul_gemv", "36_rmsnorm", "43_maxpool3d", "77_conv_transpose3d",
            "82_depthwise_conv2d"]
# twenty level-1 problems of every kind (GEMMs, elementwise, reductions, norms, pooling,
# convolutions, scans, losses), none of them a showcase problem
KB_IDS = [1, 3, 5, 8, 12, 19, 23, 26, 33, 35, 40, 42, 47, 51, 54, 63, 67, 87, 89, 95]
CPU_CASES = ["relu_signed", "softmax", "matmul_small", "rmsnorm_small"]
AGREE = 0.01  # the two medians of one problem agree within this


def kb_files(kb_dir, ids):
    by_id = {}
    for name in os.listdir(kb_dir):
        head = name.split("_", 1)[0]
        if head.isdigit() and name.endswith(".py"):
            by_id[int(head)] = os.path.join(kb_dir, name)
    return [(os.path.basename(by_id[i])[:-3], by_id[i]) for i in ids if i in by_id]


def problems(kb_dir, dtype, only=None, cpu=False):
    """(name, path, dtype) of the problems timed: the showcase problems in bf16 and KB_IDS from
    kb_dir in `dtype` (the small CPU cases in fp32 with cpu), those named in `only` (comma-separated
    names or level-1 ids) where given."""
    def example(name, dt):
        return name, os.path.join(ROOT, "examples", "problems", name + ".py"), dt
    if cpu:
        cases = [example(n, "fp32") for n in CPU_CASES]
    else:
        cases = [example(n, "bf16") for n in SHOWCASE]
        if os.path.isdir(kb_dir):
            cases += [(n, p, dtype) for n, p in kb_files(kb_dir, KB_IDS)]
        else:
            print("note: no KernelBench folder at %s: showcase problems only" % kb_dir)
    if only:
        want = set(only.split(","))
        cases = [c for c in cases if c[0] in want or c[0].split("_", 1)[0] in want]
    return cases


def time_both(timer, fn, first, min_time):
    """{"time": summary, "ci": summary}, the one named first timed first."""
    opts = {"time": {"stop": "time", "min_time": min_time}, "ci": {"stop": "ci"}}
    order = [first, "ci" if first == "time" else "time"]
    out = {}
    for rule in order:
        out[rule] = timer.measure(fn, **opts[rule])
    return out


def row_of(name, res):
    f, a = res["time"], res["ci"]
    return {"problem": name, "fixed_ms": f["median"], "ci_ms": a["median"],
            "ratio": a["median"] / f["median"], "fixed_calls": f["n"], "ci_calls": a["n"],
            "fixed_s": f["elapsed_ms"] / 1e3, "ci_s": a["elapsed_ms"] / 1e3,
            "ci_by": (a.get("stop") or {}).get("by"), "ci_rel": (a.get("stop") or {}).get("ci_rel"),
            "fixed_spread": f.get("spread"), "ci_spread": a.get("spread")}


def one_problem(torch, timer, name, path, dtype_name, first, min_time, device):
    from kagent_eval.common import inputs, loader
    dtype = loader.torch_dtype(torch, dtype_name)
    problem = loader.load_module("problem_" + name, path)
    model = loader.build_model(torch, problem.Model, list(problem.get_init_inputs()), 42, dtype,
                               device)
    args, _ = inputs.make_inputs(torch, problem, 42, 0, dtype, device)

    def fn():
        with torch.no_grad():
            model(*args)
    try:
        timer.warm(fn, 3, 0.1)
        return row_of(name, time_both(timer, fn, first, min_time))
    finally:
        del model, args
        if device != "cpu":
            torch.cuda.empty_cache()


def noisy_control(torch, timer, min_time):
    """A spin of 20 us, five times as long on a fifth of the calls (seeded): p90/p10 about 5."""
    from kagent_eval.judge import trust
    rng = random.Random(5)
    base = int(0.02 * timer.cycles_per_ms) if timer.cycles_per_ms else 20000

    def fn():
        torch.cuda._sleep(base * (5 if rng.random() < 0.2 else 1))
    timer.warm(fn, 3, 0.05)
    res = time_both(timer, fn, "time", min_time)
    row = row_of("noisy control", res)
    row["fixed_flags"] = trust.figure_flags(res["time"], None, None, True)
    row["ci_flags"] = trust.figure_flags(res["ci"], None, None, True)
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kb-dir", default="/work/shared/data/kernelbench/level1")
    ap.add_argument("--only", default=None, help="comma-separated names or level-1 ids")
    ap.add_argument("--dtype", default="fp32", help="dtype of the level-1 problems")
    ap.add_argument("--min-time", type=float, default=1.0, help="the fixed loop's seconds")
    ap.add_argument("--json", default=None)
    ap.add_argument("--cpu", action="store_true")
    a = ap.parse_args()
    import torch
    device = "cpu" if a.cpu else "cuda:0"
    if not a.cpu and not torch.cuda.is_available():
        print("SKIP: no CUDA device")
        return 77
    if a.cpu:
        torch.set_num_threads(1)
    else:
        torch.cuda.set_device(0)
    from kagent_eval.child import child_common
    timer = child_common.timer(torch, device)
    cases = problems(a.kb_dir, a.dtype, a.only, a.cpu)
    rows, t0 = [], time.perf_counter()
    for k, (name, path, dtype) in enumerate(cases):
        try:
            row = one_problem(torch, timer, name, path, dtype, "time" if k % 2 else "ci",
                              a.min_time, device)
        except Exception as e:  # one problem's failure (out of memory...) is reported, not fatal
            row = {"problem": name, "error": "%s: %s" % (type(e).__name__, str(e)[:200])}
        row["dtype"] = dtype
        rows.append(row)
        print(json.dumps(row), flush=True)
    control = None if a.cpu else noisy_control(torch, timer, a.min_time)
    print(json.dumps(control), flush=True)

    name = "cpu" if a.cpu else torch.cuda.get_device_name(0)
    print("\ndevice: %s, %d problems in %.0f s" % (name, len(rows), time.perf_counter() - t0))
    print("%-44s %5s %10s %10s %7s %6s %6s %7s %7s %6s" % (
        "problem", "dtype", "fixed ms", "ci ms", "ratio", "calls", "calls", "fixed s", "ci s",
        "by"))
    bad, fixed_s, ci_s = [], 0.0, 0.0
    for r in rows:
        if "error" in r:
            print("%-44s %5s  error: %s" % (r["problem"][:44], r["dtype"], r["error"]))
            continue
        fixed_s += r["fixed_s"]
        ci_s += r["ci_s"]
        off = abs(r["ratio"] - 1.0) > AGREE
        if off:
            bad.append(r["problem"])
        print("%-44s %5s %10.4f %10.4f %7.4f %6d %6d %7.3f %7.3f %6s%s" % (
            r["problem"][:44], r["dtype"], r["fixed_ms"], r["ci_ms"], r["ratio"], r["fixed_calls"],
            r["ci_calls"], r["fixed_s"], r["ci_s"], r["ci_by"], "  <- disagree" if off else ""))
    print("timed-call seconds, all problems: fixed %.2f s, ci %.2f s (%.1fx less)" % (
        fixed_s, ci_s, fixed_s / max(ci_s, 1e-9)))
    if control is None:
        print("RESULT (CPU: the script ran; its figures are no GPU's)")
        return 0
    flagged = "spread" in control["fixed_flags"] and "spread" in control["ci_flags"]
    print("noisy control: spread fixed %.2f (flags %s), ci %.2f (flags %s, %d calls, by %s)" % (
        control["fixed_spread"] or 0, control["fixed_flags"], control["ci_spread"] or 0,
        control["ci_flags"], control["ci_calls"], control["ci_by"]))
    errors = [r["problem"] for r in rows if "error" in r]
    ok = not bad and flagged and not errors
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": rows, "control": control}, f, indent=1)
    print("RESULT %s: %d of %d problems within %.0f%%%s; noisy control flagged by both: %s%s" % (
        "PASS" if ok else "FAIL", len(rows) - len(bad) - len(errors), len(rows), AGREE * 100,
        " (disagree: %s)" % ", ".join(bad) if bad else "", "yes" if flagged else "NO",
        "; errors: %s" % ", ".join(errors) if errors else ""))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
