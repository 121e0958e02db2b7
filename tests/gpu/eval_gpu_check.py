#!/usr/bin/env python3
"""GPU check of the evaluator (kagent_eval) through a real worker process.

    python3 tests/gpu/eval_gpu_check.py [--part adversarial|showcase|repeat|all|a,b] [--only 36_rmsnorm,...]

adversarial: the GPU cheats of tests/fixtures/adversarial/gpu_*.py are caught, and a kernel
that hangs, one that segfaults and one that writes out of bounds each give a clean result while
the next job still succeeds. showcase: the five showcase problems (examples/problems/) with the
examples' kernels in bf16: verified and timed, eager and torch.compile against
triton.testing.do_bench (mean) in the same run. repeat: one candidate timed several times
(p90/p10 spread and run-to-run variation).
Prints a table; writes JSON to $OUT/eval_gpu_check.json when OUT is set.
Exit status: 0 all checks passed, 1 a check failed, 77 skipped (no CUDA here).
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "eval"))

SHOWCASE = ["4_matmul_gemv", "36_rmsnorm", "43_maxpool3d", "77_conv_transpose3d", "82_depthwise_conv2d"]
ADV = "tests/fixtures/adversarial/"
EV = "tests/fixtures/eval/"
GOOD = (EV + "gpu_relu_problem.py", EV + "gpu_relu_triton.py")
# candidate, problem, accept(result) -> bool, description
ADVERSARIAL = [
    ("gpu_fallback_cublas.py", "gpu_matmul_problem.py",
     lambda r: not r["ok"] and r["stage"] == "audit" and r["error"].startswith("EFALLBACK"), "EFALLBACK"),
    ("gpu_dummy_kernel_fallback.py", "gpu_matmul_problem.py",
     lambda r: not r["ok"] and r["error"].startswith("EFALLBACK"), "EFALLBACK"),
    ("gpu_side_stream.py", "gpu_relu_problem.py",
     lambda r: not r["ok"] and r["stage"] == "timing" and r["error"].startswith("EUNTRUSTED"),
     "EUNTRUSTED"),
    ("gpu_uninitialized_output.py", "gpu_relu_problem.py",
     lambda r: not r["ok"] and r["error"].startswith("EMISMATCH"), "EMISMATCH"),
    ("gpu_mutate_input.py", "gpu_relu_problem.py",
     lambda r: not r["ok"] and r["error"].startswith("EMISMATCH") and "wrote into its input" in
     r["error"], "EMISMATCH, input written"),
    ("gpu_out_of_bounds.py", "gpu_relu_problem.py",
     lambda r: not r["ok"] and r["error"].split(":")[0] in ("ECUDA", "ECRASH", "EMISMATCH", "ETIMEDOUT"),
     "clean failure"),
    ("gpu_kernel_hang.py", "gpu_relu_problem.py",
     lambda r: not r["ok"] and r["error"].startswith("ETIMEDOUT"), "ETIMEDOUT"),
    ("cpu_segfault.py", "gpu_relu_problem.py",
     lambda r: not r["ok"] and r["error"].startswith("ECRASH"), "ECRASH"),
    ("cpu_cache_by_address.py", "gpu_matmul_problem.py",
     lambda r: not r["ok"], "rejected"),
    ("cpu_cache_by_content.py", "gpu_matmul_problem.py",
     lambda r: not r["ok"], "rejected"),
    ("cpu_repeat_fast_path.py", "gpu_matmul_problem.py",
     lambda r: not r["ok"], "rejected"),
]


def save(rows, part=None):
    """Rows so far to $OUT, so a run cut short still leaves its figures."""
    out_dir = os.environ.get("OUT")
    if out_dir:
        with open(os.path.join(out_dir, "eval_gpu_check_rows.json"), "w") as f:
            json.dump(rows, f, indent=1, default=str)


def short(r):
    return {k: r.get(k) for k in ("ok", "stage", "error", "flags", "time_ms", "eager_ms", "compile_ms",
                                  "do_bench", "speedup_vs_eager", "speedup_vs_compile", "audit",
                                  "max_abs_err", "max_rel_err", "roofline", "elapsed", "baseline_times",
                                  "baseline_errors", "kernels", "stage_s", "reference_s")}


def part_adversarial(w, rows, only=None):
    ok_all = True
    for cand, prob, accept, want in ADVERSARIAL:
        if only and not any(o in cand for o in only):
            continue
        # a fault far outside the allocation can be serviced page by page (HMM) instead of
        # failing at once: the stage timeout must end it
        extra = {"timeout": 30} if ("hang" in cand or "out_of_bounds" in cand) else {}
        t0 = time.time()
        r = w.job("benchmark", prob, os.path.join(ROOT, ADV, cand), dtype="fp32",
                  bench={"min_time": 0.2, "baselines": []}, **extra)
        passed = bool(accept(r))
        g = w.job("verify", os.path.basename(GOOD[0]), os.path.join(ROOT, GOOD[1]))
        follow = bool(g["ok"])
        ok_all &= passed and follow
        rows.append({"part": "adversarial", "candidate": cand, "expected": want, "caught": passed,
                     "next_job_ok": follow, "wall_s": time.time() - t0, "result": short(r)})
        save(rows)
        print("%-30s %-18s caught=%-5s next_ok=%-5s %s %s" % (cand, want, passed, follow,
              (r.get("error") or "")[:90], r.get("flags")), flush=True)
    return ok_all


def part_showcase(w, rows, only, dtype):
    ok_all = True
    for name in only:
        t0 = time.time()
        r = w.request("benchmark", {"problem": os.path.join(ROOT, "examples/problems", name + ".py"),
                                    "candidate": os.path.join(ROOT, "examples/kernels", name + ".py"),
                                    "dtype": dtype, "fallback_policy": "flag",
                                    "bench": {"min_time": 0.5, "baselines": ["eager", "compile"],
                                              "do_bench": True}}, timeout=1200)
        res = r.get("result") or {"ok": False, "error": r.get("error")}
        db = res.get("do_bench") or {}
        agree = {}
        for base in ("eager", "compile"):
            ours = (res.get("baseline_times") or {}).get(base, {}).get("mean")
            if ours and db.get(base):
                agree[base] = ours / db[base] - 1.0
        good = bool(res.get("ok")) and all(abs(v) < 0.05 for v in agree.values()) and len(agree) == 2
        ok_all &= good
        rows.append({"part": "showcase", "problem": name, "dtype": dtype, "wall_s": time.time() - t0,
                     "agree_vs_do_bench": agree, "result": short(res)})
        save(rows)
        tm = res.get("time_ms") or {}
        print("%-22s ok=%-5s cand=%s p10/p90=%s/%s eager=%s compile=%s do_bench=%s agree=%s err=%s flags=%s" % (
            name, res.get("ok"), _f(tm.get("median")), _f(tm.get("p10")), _f(tm.get("p90")),
            _f(res.get("eager_ms")), _f(res.get("compile_ms")), {k: _f(v) for k, v in db.items()},
            {k: "%+.1f%%" % (100 * v) for k, v in agree.items()}, (res.get("error") or "")[:120],
            res.get("flags")), flush=True)
    return ok_all


def part_repeat(w, rows, name, dtype, times=5):
    meds = []
    for _ in range(times):
        r = w.request("benchmark", {"problem": os.path.join(ROOT, "examples/problems", name + ".py"),
                                    "candidate": os.path.join(ROOT, "examples/kernels", name + ".py"),
                                    "dtype": dtype, "fallback_policy": "flag",
                                    "bench": {"min_time": 0.5, "baselines": []}}, timeout=600)
        res = r.get("result") or {}
        tm = res.get("time_ms") or {}
        meds.append(tm.get("median"))
        rows.append({"part": "repeat", "problem": name, "result": short(res)})
    good = [m for m in meds if m]
    var = (max(good) / min(good) - 1.0) if len(good) == times else None
    print("repeat %s: medians %s run-to-run spread %s" % (name, [_f(m) for m in meds],
          None if var is None else "%.2f%%" % (100 * var)), flush=True)
    rows.append({"part": "repeat_summary", "problem": name, "medians": meds, "max_over_min_minus_1": var})
    save(rows)
    return var is not None and var < 0.02


def _f(x):
    return None if x is None else "%.4g" % x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", default="all")
    ap.add_argument("--only", default=",".join(SHOWCASE))
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--repeat", default="36_rmsnorm")
    ap.add_argument("--adv", default="", help="comma-separated substrings of adversarial fixtures")
    args = ap.parse_args()
    from worker_client import Worker, have_cuda
    if not have_cuda():
        print("SKIP: no CUDA device here")
        return 77
    w = Worker(0)
    print("worker:", w.ready, flush=True)
    rows, ok = [], True
    out_dir = os.environ.get("OUT")
    parts = set(args.part.split(","))
    if "all" in parts:
        parts = {"adversarial", "showcase", "repeat"}
    try:
        if "adversarial" in parts:
            ok &= part_adversarial(w, rows, [a for a in args.adv.split(",") if a])
        if "showcase" in parts:
            ok &= part_showcase(w, rows, [s for s in args.only.split(",") if s], args.dtype)
        if "repeat" in parts:
            ok &= part_repeat(w, rows, args.repeat, args.dtype)
    finally:
        w.close()
        if out_dir:
            with open(os.path.join(out_dir, "eval_gpu_check_%s.json" % args.part.replace(",", "_")), "w") as f:
                json.dump({"worker": w.ready, "rows": rows}, f, indent=1, default=str)
    print("RESULT:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
