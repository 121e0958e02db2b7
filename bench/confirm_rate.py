#!/usr/bin/env python3
"""How often the final confirmation (a `confirm` job: the benchmark, then a hardened re-measure in
a fresh process that must agree with it) passes an honest kernel: N jobs in a row on one worker.

    python3 bench/confirm_rate.py [--n 6] [--problem P --kernel K] [--dtype fp32] [--gpu-hog]

--gpu-hog runs a process beside the worker that keeps the same GPU busy with matmuls outside the
lease (machine noise, as another user's job makes it): an honest kernel must then come out
verified or not measured (ENOISY), never refused.

Default kernel: the one-pass softmax of the trust checks (about 50 us on an H100). Prints one line
per job (verdict, each figure's median and p90/p10) and the counts refused and not measured
(ENOISY). To compare with an
earlier evaluator, run it with PYTHONPATH pointing at that evaluator's copy.
"""
import argparse
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "eval"))
TRUST = os.path.join(ROOT, "tests", "fixtures", "trust")
# the --gpu-hog process: matmuls of a few ms each, back to back, in bursts with pauses (noise
# that comes and goes, as another user's jobs make it)
HOG = ("import time, torch\n"
       "a = torch.randn(4096, 4096, device='cuda')\n"
       "while True:\n"
       "    t = time.time()\n"
       "    while time.time() - t < 2.0:\n"
       "        a = (a @ a).clamp_(-1, 1)\n"
       "    torch.cuda.synchronize()\n"
       "    time.sleep(1.0)\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=6)
    ap.add_argument("--problem", default=os.path.join(TRUST, "softmax_problem.py"))
    ap.add_argument("--kernel", default=os.path.join(TRUST, "softmax_onepass.py"))
    ap.add_argument("--dtype", default="fp32")
    ap.add_argument("--gpu-hog", action="store_true", help="keep the GPU busy beside the worker")
    args = ap.parse_args()
    from worker_client import Worker, have_cuda
    if not have_cuda():
        print("SKIP: no CUDA device here")
        return 77
    hog = subprocess.Popen([sys.executable, "-c", HOG]) if args.gpu_hog else None
    w = Worker(0)
    refused = noisy = 0
    try:
        for k in range(args.n):
            reply = w.request("benchmark", {"problem": os.path.abspath(args.problem),
                                            "candidate": os.path.abspath(args.kernel),
                                            "dtype": args.dtype, "confirm": True,
                                            "bench": {"baselines": []}}, timeout=600)
            r = reply.get("result") or reply
            first, second = r.get("time_ms_first") or {}, r.get("time_ms_hardened") or {}
            # "not measured" (ENOISY: the control was as noisy, noise.py) is no refusal
            noisy += 1 if r.get("code") == "ENOISY" else 0
            refused += 0 if r.get("ok") or r.get("code") == "ENOISY" else 1
            print("%d %-5s first %s (p90/p10 %s) hardened %s (p90/p10 %s) %s" % (
                k, r.get("ok"), first.get("median"), first.get("spread"), second.get("median"),
                second.get("spread"), (r.get("error") or "")[:100]), flush=True)
    finally:
        w.close()
        if hog is not None:
            hog.kill()
            hog.wait()
    print("refused %d of %d, not measured %d" % (refused, args.n, noisy))
    return 0


if __name__ == "__main__":
    sys.exit(main())
