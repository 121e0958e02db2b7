#!/usr/bin/env python3
"""GPU check of the sandbox a GPU worker gets by default (no KAGENT_EVAL_SANDBOX set; README.md
of src/gpu/eval, "Sandbox"), and of the hostile candidates of tests/eval/hostile_cases.py on it.

    python3 tests/gpu/sandbox_default_gpu_check.py [--memory-mb 8192]

default: a worker started with no sandbox setting confines writes and reads (Landlock), and a
  Triton candidate verifies and is timed in it; then a candidate writing outside its job (home,
  /tmp, site-packages) is refused on each path.
hostile: each case of hostile_cases.py (fork bomb, 300 children, /dev/shm and shared-mmap hogs at
  twice the memory limit, host UNIX socket by path, abstract socket, SIGKILL to a process of the
  same user, /etc/shadow, writes outside) through that worker on the GPU problem: each must reach
  nothing, and a Triton job must pass after each.
diagnose (only when the Triton candidate fails): runs bench/sandbox_layers.py, which puts a forked
  child under each layer alone and starts CUDA in it, and prints its lines: the first layer whose
  line says FAIL (for instance the write rule, or the write rule with ioctl on devices denied) is
  the one to fix, and its error names the errno.

Prints one line per check, then RESULT: PASS or FAIL; writes JSON to
$OUT/sandbox_default_gpu_check.json when OUT is set. Exit status: 0 all passed, 1 a check failed,
77 skipped (no CUDA here).
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "eval"))
import hostile_cases  # noqa: E402
from worker_client import Worker, fixture, have_cuda  # noqa: E402

PROBLEM = "gpu_relu_problem.py"
TRITON = fixture("eval", "gpu_relu_triton.py")


class Checks:
    def __init__(self):
        self.rows, self.ok = [], True

    def add(self, part, name, passed, detail, **extra):
        self.ok &= bool(passed)
        self.rows.append(dict(part=part, check=name, passed=bool(passed), detail=detail, **extra))
        print("%-8s %-52s %-4s %s" % (part, name, "PASS" if passed else "FAIL", detail), flush=True)
        out = os.environ.get("OUT")
        if out:
            with open(os.path.join(out, "sandbox_default_gpu_check.json"), "w") as f:
                json.dump(self.rows, f, indent=1, default=str)


def part_default(c, w):
    status = w.ready["sandbox"]
    c.add("default", "confined without KAGENT_EVAL_SANDBOX",
          status.get("enabled") and status.get("writes") == "landlock" and status.get("reads") == "landlock",
          json.dumps(status))
    t0 = time.time()
    r = w.job("benchmark", PROBLEM, TRITON, bench={"min_time": 0.2})
    c.add("default", "a Triton candidate verifies and is timed", r.get("ok"),
          "median %s ms, %.0f s; %s" % ((r.get("time_ms") or {}).get("median"), time.time() - t0,
                                        (r.get("error") or "")[:300]))
    case = hostile_cases.WriteOutside(os.getuid(), status)
    result, reached = case.run(w, PROBLEM)
    c.add("default", "writes outside the job are refused",
          not reached and (result.get("error") or "").count("Permission denied") == 3,
          reached or (result.get("error") or "")[:300])
    return bool(r.get("ok"))


def part_hostile(c, w):
    status = w.ready["sandbox"]
    uid = os.getuid()
    for case_class in hostile_cases.CASES:
        if not hostile_cases.applicable(case_class, uid):
            continue
        missing = case_class.layer(status)
        t0 = time.time()
        case = case_class(uid, status)
        try:
            result, reached = case.run(w, PROBLEM)
        except Exception as e:
            result, reached = {}, "check error: %s" % e
        good = w.job("verify", PROBLEM, TRITON)
        c.add("hostile", case_class.name, not reached and good.get("ok"),
              "job %s; reached: %s%s; next Triton job ok=%s; %.0f s" % (
                  result.get("code") or "ok", reached or "nothing",
                  " (layer missing: %s)" % missing if missing else "", good.get("ok"), time.time() - t0),
              error=(result.get("error") or "")[:500])


def diagnose():
    print("diagnose: bench/sandbox_layers.py (each layer alone around CUDA's start)", flush=True)
    p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "sandbox_layers.py")],
                       capture_output=True, text=True, timeout=600)
    for line in (p.stdout + p.stderr).splitlines():
        print("diagnose: " + line, flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memory-mb", type=int, default=8192,
                    help="the candidates' host memory limit (the hogs take twice this)")
    args = ap.parse_args()
    if not have_cuda():
        print("SKIP: no CUDA device here")
        return 77
    c = Checks()
    env = {k: v for k, v in os.environ.items() if k != "KAGENT_EVAL_SANDBOX"}
    os.environ.clear()
    os.environ.update(env)  # the default: no sandbox setting at all
    w = Worker(0, env={"KAGENT_EVAL_MEMORY_MB": str(args.memory_mb)})
    try:
        triton_ok = part_default(c, w)
        if triton_ok:
            part_hostile(c, w)
    finally:
        w.close()
    if not triton_ok:
        diagnose()
    print("RESULT:", "PASS" if c.ok else "FAIL")
    return 0 if c.ok else 1


if __name__ == "__main__":
    sys.exit(main())
