"""Does the work the evaluator runs without the GPU's lease disturb a timing on the same GPU?

The pool's workers hold their GPU's lease (src/gpu/eval/README.md, "Several workers on one GPU")
shared around untimed GPU work and exclusive around timings. Some of a job needs no lease at all:
preparing a sandbox (a CUDA context, the timer's buffers, CUPTI's set-up, Triton's host-side
start-up: no kernel runs). This benchmark times control kernels alone and while background
processes prepare sandboxes, or only create CUDA contexts, in a loop; and, as the positive
control, while they run kernels without any lease (on the H100 that control moved the timings
no more than the others did: docs/results/2026-11-24-throughput.md, so a ratio near 1 here
bounds what this method can see, not more).

    python3 bench/lease_free_work.py [--seconds 2.5] [--procs 3] [--rounds 2] [--json out.json]

Each timing is taken as the evaluator takes one (timing.Timer, 50 ms of calls); prints, for each
control kernel and each background load, the median and p10/p90 of those timings' medians and
the median's ratio to alone. GPU only.
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src", "gpu", "eval"))

# Background loads: each runs in its own process (started with --load NAME) until killed.
LOADS = ("prepare", "contexts", "kernels")


def _load_prepare():
    """A sandbox's preparation again and again: fork (as the worker does, torch and Triton
    imported), prepare, exit."""
    import torch  # noqa: F401
    from kagent_eval.child import child_candidate
    while True:
        pid = os.fork()
        if pid == 0:
            try:
                child_candidate.prepare("cuda:0", None)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)


def _load_contexts():
    """Only CUDA contexts created and destroyed: fork, torch.cuda.init, one allocation, exit."""
    import torch
    while True:
        pid = os.fork()
        if pid == 0:
            torch.cuda.init()
            torch.empty(1 << 20, device="cuda:0")
            os._exit(0)
        os.waitpid(pid, 0)


def _load_kernels():
    """The positive control: kernels that run (a copy of 256 MiB) with short pauses, the way a
    correctness trial would if it ran without the lease."""
    import torch
    x = torch.empty(1 << 26, device="cuda:0")
    y = torch.empty_like(x)
    while True:
        for _ in range(5):
            y.copy_(x)
        torch.cuda.synchronize()
        time.sleep(0.002)


def _controls(torch):
    """name -> callable: one launch-bound kernel and one bandwidth-bound one."""
    a = torch.randn(512, 512, device="cuda:0")
    b = torch.randn(512, 512, device="cuda:0")
    x = torch.randn(1 << 26, device="cuda:0")
    y = torch.empty_like(x)
    return {"matmul_512": lambda: torch.mm(a, b), "copy_256MiB": lambda: y.copy_(x)}


def _time(torch, fn, seconds):
    """Medians (ms) of repeated timings taken the way the evaluator takes one (timing.Timer:
    warm-up, L2 flush and launch pad before each call, CUDA events) for about `seconds`."""
    from kagent_eval.common.timing import Timer
    timer = Timer(torch, "cuda:0")
    out, t_end = [], time.monotonic() + seconds
    while time.monotonic() < t_end:
        out.append(timer.measure(fn, min_time=0.05, warmup_time=0.02)["median"])
    return out


def _summary(xs):
    xs = sorted(xs)
    q = lambda p: xs[min(len(xs) - 1, int(p * len(xs)))]  # noqa: E731
    return {"median": statistics.median(xs), "p10": q(0.10), "p90": q(0.90), "n": len(xs)}


def _start(load, procs):
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", "src", "gpu", "eval"))
    ps = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--load", load], env=env,
                           start_new_session=True) for _ in range(procs)]
    return ps


def _stop(ps):
    for p in ps:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
    for p in ps:
        p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=2.5, help="timing per control and load")
    ap.add_argument("--procs", type=int, default=3, help="background processes per load")
    ap.add_argument("--rounds", type=int, default=2, help="alone/loaded rounds, interleaved")
    ap.add_argument("--settle", type=float, default=1.5, help="seconds a load runs before timing")
    ap.add_argument("--loads", default=",".join(LOADS))
    ap.add_argument("--json")
    ap.add_argument("--load", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.load:
        {"prepare": _load_prepare, "contexts": _load_contexts,
         "kernels": _load_kernels}[a.load]()
        return 0
    import torch
    if not torch.cuda.is_available():
        print("lease_free_work: no GPU here: SKIPPED (nothing measured)")
        return 0
    controls = _controls(torch)
    loads = [x for x in a.loads.split(",") if x]
    samples = {(c, l): [] for c in controls for l in ["alone"] + loads}
    for r in range(a.rounds):
        for load in loads:
            for c, fn in controls.items():
                samples[(c, "alone")] += _time(torch, fn, a.seconds / a.rounds / 2)
            ps = _start(load, a.procs)
            try:
                time.sleep(a.settle)
                dead = [p for p in ps if p.poll() is not None]
                if dead:
                    print("lease_free_work: the %s load exited (%s)" % (load, dead[0].returncode))
                for c, fn in controls.items():
                    samples[(c, load)] += _time(torch, fn, a.seconds / a.rounds)
            finally:
                _stop(ps)
            print("round %d: %s done" % (r + 1, load), flush=True)
    rows = []
    print("\n%-12s %-14s %10s %10s %10s %7s %8s" % ("control", "background", "median ms",
                                                    "p10", "p90", "timings", "vs alone"))
    for c in controls:
        alone = _summary(samples[(c, "alone")])
        for load in ["alone"] + loads:
            s = _summary(samples[(c, load)])
            s.update(control=c, load=load, ratio=s["median"] / alone["median"],
                     inside=alone["p10"] <= s["median"] <= alone["p90"])
            rows.append(s)
            print("%-12s %-14s %10.4f %10.4f %10.4f %7d %7.3fx%s" % (
                c, load, s["median"], s["p10"], s["p90"], s["n"], s["ratio"],
                "" if s["inside"] else "  (outside alone's p10..p90)"))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(0), "procs": a.procs, "rows": rows}, f,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
