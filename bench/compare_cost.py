#!/usr/bin/env python3
"""What the worker's comparison of a job's trials costs (verdict._compare_side_by_side), and
whether the BLAS library's thread pool slows the compare threads down.

    python3 bench/compare_cost.py [--trials 9] [--reps 5] [--before DIR]

Each trial is a million-element sample of an fp32 output and its reference (the digest the worker
compares, compare.compare_outputs), and its input's digest before and after the call
(compare.same_digest, in the worker's own thread: the input's fingerprint since
docs/results/2026-11-29-gpu.md, and its sample, which evaluators before that compared). Prints,
median seconds per job: the trials compared one after another (outputs and inputs), then the
outputs on the worker's compare threads; and, side by side on those threads, a sum of squares
through BLAS (np.dot) against the BLAS-free one the comparison uses (value_errors.sum_sq): a
ratio well above 1 means the BLAS pool contends with the threads. Run it on
the machine whose worker is slow (bench/eval_latency.py's `worker check: trials`).
--before DIR: also the trials one after another with another copy of the evaluator (DIR holds its
kagent_eval, e.g. a checkout's src/gpu/eval), each copy in a process of its own, taking turns,
on the same trials, and the ratio before/after.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

# KAGENT_EVAL_PYTHONPATH: another copy of the evaluator (--before's processes)
sys.path.insert(0, os.environ.get("KAGENT_EVAL_PYTHONPATH")
                or os.path.join(os.path.dirname(__file__), "..", "src", "gpu", "eval"))
try:  # the evaluator in folders by floor (src/gpu/eval/README.md, "Files")
    from kagent_eval.judge import compare, value_errors, verdict  # noqa: E402
except ImportError:  # a --before copy from before the folders: one flat package
    from kagent_eval import compare, value_errors, verdict  # noqa: E402

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


def trial_pairs(n):
    rng = np.random.default_rng(0)
    pairs = []
    for _ in range(n):
        e = rng.standard_normal(N, dtype=np.float32)
        g = e + np.float32(1e-6) * rng.standard_normal(N, dtype=np.float32)
        pairs.append(([meta(g)], [meta(e)], None))
    return pairs


def one_by_one(pairs, inputs):
    """Each trial's outputs against the reference's, then its input after the call against the
    one given (verdict.check_trials's work, one trial after another). inputs: (given, after)
    digests per trial."""
    for (got, exp, _), (given, after) in zip(pairs, inputs):
        compare.compare_outputs(got, exp, 1e-4, 1e-4, 7)
        compare.same_digest(after, given)


def trial_inputs(pairs):
    """An input per trial as given and, a copy of it, as left after the call: with the sample an
    evaluator before the fingerprint compares and a fingerprint (digest.input_digest's form) for
    one since, so that each copy under --before does its own work."""
    out = []
    for _, exp, _ in pairs:
        given = dict(exp[0], full=False, fingerprint=[int(exp[0]["data"].view(np.int32).sum()), 1])
        out.append((given, dict(given, data=given["data"].copy(), fingerprint=list(given["fingerprint"]))))
    return out


def serial_in(path, trials):
    """Seconds of one job's trials compared one after another by the evaluator at `path`, in a
    process of its own."""
    env = dict(os.environ, KAGENT_EVAL_PYTHONPATH=path)
    out = subprocess.run([sys.executable, __file__, "--serial-once", "--trials", str(trials)],
                         env=env, check=True, capture_output=True, text=True).stdout
    return float(out.split()[-1])


def before_after(before, trials, reps):
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "gpu", "eval")
    times = {"before": [], "after": []}
    for _ in range(reps):
        times["before"].append(serial_in(before, trials))
        times["after"].append(serial_in(here, trials))
    b, a = statistics.median(times["before"]), statistics.median(times["after"])
    print("  one after another, %d processes each, taking turns: before %.3f s, after %.3f s, "
          "before/after %.2f" % (reps, b, a, b / a))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=9)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--before", help="another copy's src/gpu/eval, timed side by side")
    ap.add_argument("--serial-once", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.before and not os.path.isdir(os.path.join(a.before, "kagent_eval")):
        ap.error("--before %s: no kagent_eval there (give a copy's src/gpu/eval)" % a.before)
    pairs = trial_pairs(a.trials)
    inputs = trial_inputs(pairs)
    if a.serial_once:  # one figure for before_after: the trials once to warm up, then timed
        print(timed(lambda: one_by_one(pairs, inputs), 3))
        return
    serial = timed(lambda: one_by_one(pairs, inputs), a.reps)
    one = verdict.trial_comparer(1e-4, 1e-4, 7)
    threaded = timed(lambda: list(verdict._compare_side_by_side(pairs, one)), a.reps)
    rng = np.random.default_rng(1)
    vecs = [rng.standard_normal(N) for _ in range(a.trials)]
    with ThreadPoolExecutor(max_workers=verdict.COMPARE_THREADS) as pool:
        blas = timed(lambda: list(pool.map(lambda v: [float(np.dot(v, v)) for _ in range(6)], vecs)), a.reps)
        free = timed(lambda: list(pool.map(lambda v: [value_errors.sum_sq(v) for _ in range(6)], vecs)), a.reps)
    print("trials %d of %d elements, compare threads %d, cpus %s" % (
        a.trials, N, verdict.COMPARE_THREADS, os.cpu_count()))
    print("  compared one after another   %7.3f s" % serial)
    print("  compared on the threads      %7.3f s" % threaded)
    print("  6 sums of squares per trial on the threads: BLAS %.4f s, BLAS-free %.4f s, ratio %.2f" % (
        blas, free, blas / free if free else float("nan")))
    if a.before:
        before_after(a.before, a.trials, a.reps)


if __name__ == "__main__":
    main()
