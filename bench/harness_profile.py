#!/usr/bin/env python3
"""Where a warm job's harness time goes, function by function (#29's harness overhead):

    python3 bench/harness_profile.py [--n 3] [--cpu [--sampled]]

Runs bench/eval_latency.py's job (the profiler fixture on GPU 0, or the CPU problem) n times on
one warm worker started with KAGENT_EVAL_PYPROFILE=1 (src/gpu/eval/kagent_eval/profile/pyprofile.py),
then prints, for the last job, its phases and the two cProfile listings: the candidate's process
(load, trials, warm-up, timed loop, checks of its own) and the worker's checks after that
process's last message. Profiling slows what it profiles: read the listings for where the time
goes, and bench/eval_latency.py for how much there is. Writes JSON to $OUT/harness_profile.json
when OUT is set."""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import eval_latency  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=3)
    ap.add_argument("--cpu", action="store_true")
    ap.add_argument("--sampled", action="store_true",
                    help="with --cpu: eval_latency's problem whose outputs travel as samples")
    args = ap.parse_args()
    if args.sampled:
        if not args.cpu:
            ap.error("--sampled is a CPU-mode problem: add --cpu")
        eval_latency.CPU_PROBLEM[0] = "relu_sampled_problem.py"
    device = "cpu" if args.cpu else 0
    w = eval_latency.Worker(device, env={"KAGENT_EVAL_PYPROFILE": "1"})
    try:
        results = [w.request("benchmark", eval_latency.job(i, args.cpu), timeout=600)["result"]
                   for i in range(args.n)]
    finally:
        w.close()
    last = results[-1]
    if not last.get("ok"):
        sys.exit("the last job failed: %s" % last.get("error"))
    print("last job's stages (s):", {k: round(v, 3) for k, v in (last.get("stage_s") or {}).items()})
    print("last job's worker phases (s):", json.dumps(last.get("worker_s"), default=str)[:600])
    listings = last.get("pyprofile") or {}
    for side in ("child", "worker_checks"):
        print("\n==== %s ====" % side)
        print(listings.get(side, "(none)"))
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "harness_profile.json"), "w") as f:
            json.dump({"stage_s": last.get("stage_s"), "worker_s": last.get("worker_s"),
                       "pyprofile": listings}, f, indent=1)


if __name__ == "__main__":
    main()
