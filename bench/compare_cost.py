#!/usr/bin/env python3
"""What the worker's comparison of a job's trials costs (verdict._compare_side_by_side), and
whether the BLAS library's thread pool slows the compare threads down.

    python3 bench/compare_cost.py [--trials 9] [--reps 5]

Each trial is a million-element sample of an fp32 output and its reference (the digest the
worker compares, compare.compare_outputs). Prints, median seconds per job: the trials compared
one after another, then on the worker's compare threads; and, side by side on those threads,
a sum of squares through BLAS (np.dot) against the BLAS-free one the comparison uses
(compare.sum_sq): a ratio well above 1 means the BLAS pool contends with the threads. Run it on
the machine whose worker is slow (bench/eval_latency.py's `worker check: trials`).
"""
import argparse
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src", "gpu", "eval"))
from kagent_eval import compare, verdict  # noqa: E402

N = 1 << 20


def meta(data):
    return {"kind": "tensor", "plain": True, "shape": [8192, 8192], "dtype": "float32",
            "numel": 8192 * 8192, "data": data,
            "stats": {"nonfinite": 0, "sum": float(data.sum(dtype=np.float64)),
                      "abs_sum": float(np.abs(data).sum(dtype=np.float64))}}


def timed(fn, reps):
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=9)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    pairs = []
    for _ in range(a.trials):
        e = rng.standard_normal(N, dtype=np.float32)
        g = e + np.float32(1e-6) * rng.standard_normal(N, dtype=np.float32)
        pairs.append(([meta(g)], [meta(e)], None))
    serial = timed(lambda: [compare.compare_outputs(p[0], p[1], 1e-4, 1e-4, 7) for p in pairs], a.reps)
    threaded = timed(lambda: list(verdict._compare_side_by_side(pairs, 1e-4, 1e-4, 7)), a.reps)
    vecs = [rng.standard_normal(N) for _ in range(a.trials)]
    with ThreadPoolExecutor(max_workers=verdict.COMPARE_THREADS) as pool:
        blas = timed(lambda: list(pool.map(lambda v: [float(np.dot(v, v)) for _ in range(6)], vecs)), a.reps)
        free = timed(lambda: list(pool.map(lambda v: [compare.sum_sq(v) for _ in range(6)], vecs)), a.reps)
    print("trials %d of %d elements, compare threads %d, cpus %s" % (
        a.trials, N, verdict.COMPARE_THREADS, os.cpu_count()))
    print("  compared one after another   %7.3f s" % serial)
    print("  compared on the threads      %7.3f s" % threaded)
    print("  6 sums of squares per trial on the threads: BLAS %.4f s, BLAS-free %.4f s, ratio %.2f" % (
        blas, free, blas / free if free else float("nan")))


if __name__ == "__main__":
    main()
