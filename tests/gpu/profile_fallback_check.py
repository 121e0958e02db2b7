"""GPU check of the ncu fallback: with the CUPTI library made unloadable, profile_any must
profile the fixture forward through the ncu CLI and return the same result shape.

    PYTHONPATH=src/gpu/eval python3 tests/gpu/profile_fallback_check.py
Exits 77 (skipped) without a CUDA device or without ncu, 0 on success, 1 on failure.
"""
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "src", "gpu", "eval"))
os.environ["KAGENT_PROF_LIB"] = "/nonexistent/libkagent_prof.so"


def main():
    import torch
    if not torch.cuda.is_available():
        print("SKIP: no CUDA device")
        return 77
    from kagent_eval.profile import ncu_cli, ncu_target, profiling
    if not ncu_cli.ncu_available()[0]:
        print("SKIP: ncu not installed")
        return 77
    problem = os.path.join(ROOT, "tests/gpu/profile_fixture_problem.py")
    kernel = os.path.join(ROOT, "tests/gpu/profile_fixture_kernel.py")
    job = {"problem": problem, "candidate": kernel, "dtype": "bf16", "device": 0}
    _, forward, _ = ncu_target.build_forward(job)
    forward()
    ok, reason = profiling.available(0)
    print("available:", ok, reason)
    res = profiling.profile_any(forward, "sol", 0, problem, kernel, job)
    names = [k["name"] for k in res["kernels"]]
    print("backend:", res["backend"], "kernels:", names, "cupti_error:", res.get("cupti_error"))
    print("aggregate:", res["aggregate"])
    good = (ok and reason.startswith("ncu: ") and res["backend"] == "ncu"
            and names == ["_scale_shift_kernel", "_row_sum_kernel"]
            and res["aggregate"].get("gpu__time_duration.sum", 0) > 0
            and set(res["metrics"]) == set(names) and "ENOTSUP" in res.get("cupti_error", ""))
    print("RESULT:", "PASS" if good else "FAIL")
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
