"""Where CUPTI and ncu disagree, and why: one job profiled under several ncu modes and several
libkagent_prof cache-state variants, a few telling metrics printed side by side per kernel.

    PYTHONPATH=src/gpu/eval python3 bench/ncu_variants.py [--targets fixture,4] [--app-replay]

ncu variants: the reference (`--clock-control none`, cache control all, kernel replay), without
cache control, with only the focus metrics (fewer passes), and with `--replay-mode application`
(the whole process once per pass, no save/restore; --app-replay, slow for big inputs).
CUPTI variants: the default per-kernel sweep, a sweep of 4 GiB (more pages than the TLBs
cover), and host-side idle time after each sweep (the device idles as between ncu's passes).
"preroll" variants launch a tiny kernel inside ncu's range before the forward and drop it, so
whatever ncu does at the start of a pass is charged to it. --repeat N runs the reference
variants (CUPTI and ncu, full set) N times, to show each tool's own run-to-run spread.
Writes the values to $OUT/ncu_variants.json.
"""
import argparse
import json
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "src", "gpu", "eval"))
sys.path.insert(0, os.path.join(ROOT, "tests", "gpu"))

FOCUS = [
    "gpu__time_duration.sum",
    "sm__cycles_active.avg",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "lts__t_sector_hit_rate.pct",
    "smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct",
]

CUPTI_VARIANTS = [
    ("cupti", {}),
    ("cupti sweep 4 GiB", {"KAGENT_PROF_SWEEP_MB": "4096"}),
    ("cupti idle 200us", {"KAGENT_PROF_SWEEP_IDLE_US": "200"}),
    ("cupti idle 5ms", {"KAGENT_PROF_SWEEP_IDLE_US": "5000"}),
]


DRAM = "dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum"


def ncu_variants(app_replay, repeat):
    """(label, metrics, extra ncu options, pre-roll kernels)."""
    out = [("ncu#%d" % i if repeat > 1 else "ncu", "full", [], 0) for i in range(repeat)]
    out += [("ncu cache none", "full", ["--cache-control", "none"], 0),
            ("ncu focus only", ",".join(FOCUS), [], 0),
            ("ncu dram preroll", DRAM, [], 1)]
    if app_replay:
        out += [("ncu app", DRAM, ["--replay-mode", "application"], 0),
                ("ncu app preroll", DRAM, ["--replay-mode", "application"], 1)]
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--targets", default="fixture,4")
    p.add_argument("--app-replay", action="store_true")
    p.add_argument("--repeat", type=int, default=1, help="runs of the reference variants")
    a = p.parse_args()
    import torch
    if not torch.cuda.is_available():
        print("SKIP: no CUDA device")
        return 77
    from kagent_eval.profile import ncu_target, profiling
    from profile_gpu_check import targets_for

    report = {"device": torch.cuda.get_device_name(0), "targets": {}}
    for name, problem, candidate in targets_for(a.targets.split(",")):
        job = {"problem": problem, "candidate": candidate, "dtype": "bf16", "device": 0,
               "seed": 0}
        _, forward, _ = ncu_target.build_forward(job)
        forward()
        torch.cuda.synchronize()
        results = {}
        variants = [("cupti#%d" % i, {}) for i in range(a.repeat)] if a.repeat > 1 else []
        for label, env in variants + CUPTI_VARIANTS[a.repeat > 1:]:
            saved = {k: os.environ.get(k) for k in env}
            os.environ.update(env)
            try:
                results[label] = profiling.profile(forward, "full", 0)["kernels"]
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
        del forward
        torch.cuda.empty_cache()
        for label, metrics, extra, preroll in ncu_variants(a.app_replay, a.repeat):
            try:
                results[label] = profiling.profile_with_ncu(
                    problem, candidate, dict(job, preroll=preroll), metrics,
                    ncu_args=extra)["kernels"]
            except profiling.ProfilerError as e:
                print("[%s] %s: %s" % (name, label, e))
        report["targets"][name] = {k: [{"name": r["name"], "metrics": r["metrics"]} for r in v]
                                   for k, v in results.items()}
        n = max(len(v) for v in results.values())
        for i in range(n):
            kname = next((v[i]["name"] for v in results.values() if len(v) > i), "?")
            print("\n[%s] kernel %d %s" % (name, i, kname[:60]))
            print("  %-20s" % "variant" + "".join("%16s" % m.split("__")[1][:15] for m in FOCUS))
            for label, rows in results.items():
                vals = rows[i]["metrics"] if len(rows) > i else {}
                print("  %-20s" % label + "".join(
                    "%16s" % ("-" if vals.get(m) is None else "%.4g" % vals[m]) for m in FOCUS))
    path = os.path.join(os.environ.get("OUT", "/tmp"), "ncu_variants.json")
    with open(path, "w") as f:
        json.dump(report, f, indent=1)
    print("\n->", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
