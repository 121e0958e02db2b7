#!/usr/bin/env python3
"""GPU check of the GPU's host lease (lease.HostLock; docs/lua-api.md, the lease): two workers of
two different pools on one GPU, each its pool's only worker (started without --lease, so they
never ask a pool), time jobs at the same moment. Their timed stages must take turns: no timed
stage (audit, benchmark, benchmark_loop, benchmark_trace, benchmark_probe, profile, on the host's
monotonic clock) of one overlaps one of the other's. Also prints a control kernel's median
alone and beside the other pool's jobs: the same within the spread where the lease holds.

    python3 tests/gpu/host_lease_gpu_check.py [--jobs 8]

Prints one line per check, then RESULT: PASS or FAIL. Exit status: 0 all passed, 1 a check
failed, 77 skipped (no CUDA here).
"""
import argparse
import os
import statistics
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "eval"))
TIMED = ("audit", "benchmark", "benchmark_loop", "benchmark_trace", "benchmark_probe", "profile")


def spans(result):
    at, s = result.get("stage_at") or {}, result.get("stage_s") or {}
    names = [n for n in TIMED if n in at]
    if not names:
        return None
    return (min(at[n] for n in names), max(at[n] + (s.get(n) or 0.0) for n in names))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=8)
    a = ap.parse_args()
    try:
        import torch
        if not torch.cuda.is_available():
            raise ImportError
    except ImportError:
        print("SKIP: no CUDA here")
        return 77
    from worker_client import Worker
    problem = os.path.join(ROOT, "examples", "problems", "matmul_small.py")
    with open(os.path.join(ROOT, "examples", "kernels", "matmul_small.py")) as f:
        kernel = f.read()
    dev = (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0]

    def job(i):
        return {"problem": problem, "candidate": kernel + "\n# host lease check %d\n" % i,
                "bench": {"baselines": []}}

    pools = [Worker(dev), Worker(dev)]  # two pools' only workers: neither asks a pool
    alone = [pools[0].request("benchmark", job(1000 + i), timeout=600)["result"] for i in range(3)]
    results = [[], []]

    def run(k):
        for i in range(a.jobs):
            results[k].append(pools[k].request("benchmark", job(100 * k + i), timeout=600)["result"])
    threads = [threading.Thread(target=run, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for w in pools:
        w.close()

    failures = []

    def check(ok, what):
        print(("PASS " if ok else "FAIL ") + what)
        if not ok:
            failures.append(what)
    every = results[0] + results[1]
    # a job refused for its spread alone is the evaluator failing closed on a noisy host (the
    # sweeps beside this check load its CPUs), not two pools timing at once: that is the
    # overlap check below. Anything else refused, or most jobs refused, fails.
    noisy = [r for r in every + alone if not r.get("ok") and r.get("code") == "EUNTRUSTED"
             and set((r.get("trust") or {}).get("rejected") or ()) == {"spread"}]
    ok = [r for r in every + alone if r.get("ok")]
    check(len(ok) + len(noisy) == len(every + alone) and len(ok) >= 0.75 * len(every + alone),
          "every job verified and timed, or refused for its spread alone (%d of %d verified, %d "
          "refused for spread)" % (len(ok), len(every + alone), len(noisy)))
    for r in every + alone:
        if not r.get("ok"):
            print("  not verified: stage %s: %s %s" % (r.get("stage"), r.get("error"), r.get("trust") or ""))
    a_spans = [s for s in map(spans, results[0]) if s]
    b_spans = [s for s in map(spans, results[1]) if s]
    overlaps = [(x, y) for x in a_spans for y in b_spans if x[0] < y[1] and y[0] < x[1]]
    check(len(a_spans) == a.jobs and len(b_spans) == a.jobs, "every job reported its timed stages")
    check(not overlaps, "no timed stage of one pool overlaps one of the other's (%d overlaps)" % len(overlaps))
    med = [r["time_ms"]["median"] for r in alone if r.get("ok")]
    beside = [r["time_ms"]["median"] for r in every if r.get("ok")]
    if med and beside:
        print("FIGURE control median alone %.4f ms, beside the other pool %.4f ms (%.3fx)" % (
            statistics.median(med), statistics.median(beside),
            statistics.median(beside) / statistics.median(med)))
    print("RESULT: " + ("FAIL" if failures else "PASS"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
