#!/usr/bin/env python3
"""GPU check of the sandbox a GPU worker gets by default (no KAGENT_EVAL_SANDBOX set; README.md
of src/gpu/eval, "Sandbox"), and of the hostile candidates of tests/eval/hostile_cases.py on it.

    python3 tests/gpu/sandbox_default_gpu_check.py [--memory-mb 8192] [--setups ns,nons]

Each setup is a GPU worker: "ns" as started by default (its own namespaces where the machine
gives them), "nons" with KAGENT_EVAL_NAMESPACES=0 (what a machine without namespaces gets: there
Landlock's scopes are what keeps signals and abstract sockets in; they are on in "ns" too).
default: the worker confines writes and reads (Landlock), with its device-ioctl rule (ABI >= 5)
  and scopes (ABI >= 6); CUDA starts in its children (cuInit, cudaGetDeviceCount: the reference
  and the candidate run on the GPU), a Triton candidate evaluates (verify, audit, benchmark) and
  its CUPTI profile succeeds; a candidate writing outside its job is refused on each path.
hostile: each case of hostile_cases.py (fork bomb, 300 children, /dev/shm and shared-mmap hogs at
  twice the memory limit, host UNIX socket by path in /run, abstract socket, SIGKILL to a process
  of the same user, /etc/shadow, writes outside) through that worker on the GPU problem: each
  must reach nothing, and a Triton job must pass after each. A case whose layer the machine
  lacks (named in the worker's ready line, e.g. sockets by path without namespaces) is printed
  with GAP in its detail instead of failing.
diagnose (only when the Triton candidate fails): runs bench/sandbox_layers.py, which puts a forked
  child under each layer alone and starts CUDA in it, and prints its lines: the first layer whose
  line says FAIL (for instance the write rule, the write rule with ioctl on devices denied, or
  the scopes) is the one to fix, and its error names the errno.

Prints one line per check, then RESULT: PASS or FAIL; writes JSON to
$OUT/sandbox_default_gpu_check.json when OUT is set. Exit status: 0 all passed, 1 a check failed,
77 skipped (no CUDA here). Root without namespaces drops CAP_SYS_ADMIN and CAP_PERFMON, so its
profile needs a machine that lets every user read the counters: a profile refused for
permission there is reported, not failed.
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
from check_table import Checks  # noqa: E402

PROBLEM = "gpu_relu_problem.py"
TRITON = fixture("eval", "gpu_relu_triton.py")




def part_default(c, w, setup):
    status = w.ready["sandbox"]
    abi = status.get("landlock_abi") or 0
    c.add(setup, "confined without KAGENT_EVAL_SANDBOX",
          status.get("enabled") and status.get("writes") == "landlock" and status.get("reads") == "landlock"
          and (abi < 6 or status.get("signals") in ("namespace", "landlock")), json.dumps(status))
    t0 = time.time()
    r = w.job("evaluate", PROBLEM, TRITON, bench={"min_time": 0.2})
    c.add(setup, "CUDA starts; a Triton candidate evaluates (ioctl rule%s)" % (", scopes" if abi >= 6 else ""),
          r.get("ok"), "median %s ms, %.0f s; %s" % ((r.get("time_ms") or {}).get("median"), time.time() - t0,
                                                      (r.get("error") or "")[:300]))
    prof = r.get("profile") or {}
    refused = "perm" in str(prof.get("error")).lower() and not status.get("processes", "").startswith("namespace")
    c.add(setup, "the CUPTI profile succeeds", prof.get("ok") or refused,
          "ok" if prof.get("ok") else "%s%s" % ("(counters need administrator rights without namespaces) "
                                               if refused else "", str(prof.get("error"))[:300]))
    case = hostile_cases.WriteOutside(os.getuid(), status)
    result, reached = case.run(w, PROBLEM)
    c.add(setup, "writes outside the job are refused",
          not reached and (result.get("error") or "").count("Permission denied") == 3,
          reached or (result.get("error") or "")[:300])
    return bool(r.get("ok"))


def part_hostile(c, w, setup):
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
        # a row whose layer this machine lacks (the worker's ready line says so) is a gap of the
        # machine, reported as such, not a failure of the sandbox
        gap = bool(reached and missing)
        c.add(setup, case_class.name, (not reached or gap) and good.get("ok"),
              "%sjob %s; reached: %s%s; next Triton job ok=%s; %.0f s" % (
                  "GAP " if gap else "", result.get("code") or "ok", reached or "nothing",
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
    ap.add_argument("--setups", default="ns,nons", help="ns (the default worker), nons (no namespaces)")
    args = ap.parse_args()
    if not have_cuda():
        print("SKIP: no CUDA device here")
        return 77
    c = Checks("sandbox_default_gpu_check.json")
    env = {k: v for k, v in os.environ.items() if k != "KAGENT_EVAL_SANDBOX"}
    os.environ.clear()
    os.environ.update(env)  # the default: no sandbox setting at all
    triton_ok = True
    for setup in args.setups.split(","):
        extra = {"nons": {"KAGENT_EVAL_NAMESPACES": "0"}}.get(setup, {})
        w = Worker(0, env=dict(extra, KAGENT_EVAL_MEMORY_MB=str(args.memory_mb)))
        try:
            print("worker (%s): %s" % (setup, json.dumps(w.ready.get("sandbox"))), flush=True)
            ok = part_default(c, w, setup)
            triton_ok &= ok
            if ok:
                part_hostile(c, w, setup)
        finally:
            w.close()
    if not triton_ok:
        diagnose()
    print("RESULT:", "PASS" if c.ok else "FAIL")
    return 0 if c.ok else 1


if __name__ == "__main__":
    sys.exit(main())
