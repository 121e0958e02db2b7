#!/usr/bin/env python3
"""GPU check of comparable verdicts and of property trials inside the problem's contract
(src/gpu/eval/README.md, "Correctness"), through a real worker on GPU 0.

    python3 tests/gpu/verdicts_gpu_check.py [--kernelbench DIR]

tolerance: a Triton matmul on TF32 tensor cores (tests/fixtures/eval/gpu_matmul_tf32_triton.py)
on an fp32 problem is refused under the strict tolerance and accepted under kernelbench-v0.1,
its verdict naming its errors, the KernelBench outcomes and TF32 either way; torch.mm passes
both. contract: KernelBench level 1 #98 (KL divergence of probability rows) with a correct
kernel is accepted, its property trials skipped with a note; #90 (cumprod of [0, 1) inputs)
likewise, its huge-input trial skipped; an unshifted softmax fails only a property trial
(EPROPERTY). The KernelBench files are read from --kernelbench (default
$KAGENT_KERNELBENCH, else ../shared/data/kernelbench beside the checkout); where they are
missing, the fixtures' small versions of those problems stand in.
Prints PASS/FAIL per check. Exit status: 0 all passed, 1 one failed, 77 skipped (no CUDA here).
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "eval"))
EV = os.path.join(ROOT, "tests", "fixtures", "eval")
CUMPROD = ("import torch\nclass ModelNew(torch.nn.Module):\n    def __init__(self, dim):\n"
           "        super().__init__()\n        self.dim = dim\n    def forward(self, x):\n"
           "        return torch.cumprod(x, dim=self.dim)\n")


def fx(name):
    return os.path.join(EV, name)


def kernelbench_file(base, name, fallback):
    path = os.path.join(base, "level1", name) if base else ""
    return (path, name) if path and os.path.isfile(path) else (fx(fallback), fallback + " (fixture)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernelbench", default=os.environ.get("KAGENT_KERNELBENCH") or os.path.join(
        ROOT, "..", "shared", "data", "kernelbench"))
    args = ap.parse_args()
    from worker_client import Worker, have_cuda
    if not have_cuda():
        print("SKIP: no CUDA device here")
        return 77
    w = Worker(0)
    print("worker:", json.dumps(w.ready.get("sandbox")), flush=True)
    results = []

    def check(name, problem, candidate, accept, **job):
        reply = w.request("verify", dict(problem=problem, candidate=candidate, **job), timeout=900)
        r = reply.get("result") or {}
        try:
            ok = bool(reply.get("ok")) and bool(accept(r))
        except (KeyError, TypeError, IndexError):
            ok = False
        shown = {k: r.get(k) for k in ("ok", "code", "error", "kernelbench", "likely_cause",
                                       "max_abs_err", "max_rel_err", "rel_l2_err",
                                       "skipped_trials", "property_trials")}
        print("%s %s: %s" % ("PASS" if ok else "FAIL", name, json.dumps(shown, default=str)),
              flush=True)
        results.append(ok)

    try:
        tf32 = fx("gpu_matmul_tf32_triton.py")
        problem = fx("matmul_signed_problem.py")
        check("tf32 kernel refused under strict, errors and KernelBench outcome named", problem, tf32,
              lambda r: not r["ok"] and r["code"] == "EMISMATCH" and r["kernelbench"] == {
                  "tolerance": "strict", "passes_current": False, "passes_v0_1": True}
              and r["max_abs_err"] > 1e-4 and "TF32" in r["likely_cause"])
        check("tf32 kernel accepted under kernelbench-v0.1", problem, tf32,
              lambda r: r["ok"] and r["kernelbench"] == {
                  "tolerance": "kernelbench-v0.1", "passes_current": False, "passes_v0_1": True}
              and "TF32" in r["likely_cause"], tolerance="kernelbench-v0.1")
        check("an fp32 torch.mm passes both", problem, fx("matmul_good.py"),
              lambda r: r["ok"] and r["kernelbench"]["passes_current"] and "likely_cause" not in r)

        kl, kl_name = kernelbench_file(args.kernelbench, "98_KLDivLoss.py", "kldiv_problem.py")
        check("correct KL divergence accepted (%s)" % kl_name, kl, fx("kldiv_good.py"),
              lambda r: r["ok"] and len(r["skipped_trials"]) == 4 and all(
                  "rows sum to one" in s["reason"] for s in r["skipped_trials"]))
        cp, cp_name = kernelbench_file(args.kernelbench, "90_cumprod.py", "cumprod_problem.py")
        check("correct cumprod accepted, huge inputs skipped with a note (%s)" % cp_name, cp, CUMPROD,
              lambda r: r["ok"] and any(s["distribution"] == "huge" and "[0, 1]" in s["reason"]
                                        for s in r["skipped_trials"]))
        check("cumprod overflowing in the reference: huge trial skipped",
              fx("cumprod_signed_problem.py"), CUMPROD.replace("dim=self.dim", "dim=1").replace(
                  "def __init__(self, dim)", "def __init__(self, dim=1)"),
              lambda r: r["ok"] and [s["distribution"] for s in r["skipped_trials"]] == ["huge"]
              and "not finite" in r["skipped_trials"][0]["reason"])
        check("unshifted softmax fails only a property trial: EPROPERTY",
              fx("softmax_signed_problem.py"), fx("softmax_unshifted.py"),
              lambda r: not r["ok"] and r["code"] == "EPROPERTY" and r["stage"] == "correctness")
    finally:
        w.close()
    ok = all(results)
    print("RESULT:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
