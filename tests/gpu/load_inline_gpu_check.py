#!/usr/bin/env python3
"""GPU check of KernelBench's CUDA form (load_inline with cuda_sources) through real workers on
GPU 0: the compile step before the lease, the extension cache, the library policy
(src/gpu/eval/README.md, "C++ and CUDA candidates").

    python3 tests/gpu/load_inline_gpu_check.py [--json out.json]

  verify:   examples/kernels/cuda/{relu_signed,softmax,matmul_small}.py (elementwise, reduction,
            tiled GEMM) are accepted (benchmark: audit and timing, fp32), built cold on the first
            job, own_share 1 and no library kernel; the compile step ended before the candidate's
            process began;
  cache:    the same job again finds every build (compile.cached) in under a second;
  sanitize: memcheck on relu_signed.py is clean (its target finds the step's build);
  library:  l2_gemm_bias_gelu_scale_cublas.py (cuBLAS GEMM + its own epilogue kernel) is refused
            under library = "own" (EFALLBACK) and accepted under "some" and "any", its own share
            below one half and the cuBLAS kernel named in library_kernels;
  parallel: 4 workers building 4 new sources at once take at most 1.5x one cold build;
  no GPU:   the compile step's child sees no device and cannot write /dev/nvidiactl.
Prints PASS/FAIL per check. Exit status: 0 all passed, 1 one failed, 77 skipped (no CUDA here).
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "eval"))
CUDA = os.path.join(ROOT, "examples", "kernels", "cuda")
PROBLEMS = os.path.join(ROOT, "examples", "problems")
OWN = [("relu_signed.py", "relu_signed.py"), ("softmax.py", "softmax.py"),
       ("matmul_small.py", "matmul_small.py")]
CUBLAS = ("l2_gemm_bias_gelu_scale.py", "l2_gemm_bias_gelu_scale_cublas.py")
failures, rows = [], []


def check(name, ok, detail):
    print("%s %s: %s" % ("PASS" if ok else "FAIL", name, detail))
    rows.append({"check": name, "ok": bool(ok), "detail": detail})
    if not ok:
        failures.append(name)


def job(w, op, problem, candidate, **extra):
    return w.request(op, dict(problem=os.path.join(PROBLEMS, problem), candidate=candidate,
                              **extra), timeout=1200)["result"]


def summary(r):
    c = r.get("compile") or {}
    return ("ok=%s %s compile %.1f s cached=%s own_share=%s library_kernels=%s"
            % (r.get("ok"), r.get("error", "")[:300], c.get("s") or -1, c.get("cached"),
               r.get("own_share"), (r.get("library_kernels") or [])[:2]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    from worker_client import Worker, have_cuda
    if not have_cuda():
        print("SKIP: no CUDA device")
        return 77
    root = tempfile.mkdtemp(prefix="kagent-load-inline-gpu-")
    env = {"KAGENT_EVAL_SANDBOX_DIR": root}
    w = Worker("0", env=env)
    try:
        cold = []
        for problem, kernel in OWN:
            path = os.path.join(CUDA, kernel)
            first = job(w, "benchmark", problem, path)
            c = first.get("compile") or {}
            # the candidate's process began (and a spare's took the lease later still) after it
            gate = min([t for k, t in (first.get("stage_at") or {}).items() if k != "verdict"],
                       default=None)
            cold.append(c.get("s") or 0)
            check("verify " + kernel, first.get("ok") and c.get("cached") is False
                  and first.get("own_share") == 1.0 and not first.get("library_kernels")
                  and gate is not None and c.get("ended") is not None and c["ended"] <= gate,
                  summary(first) + " compile ended %.3f s before the candidate's process began" % (
                      (gate or 0) - (c.get("ended") or 0)))
            again = job(w, "benchmark", problem, path)
            c2 = again.get("compile") or {}
            check("cache " + kernel, again.get("ok") and c2.get("cached") is True
                  and (again.get("stage_s") or {}).get("compile_source", 99) < 1.0,
                  summary(again))
        # compute-sanitizer's target imports the candidate too: it finds the step's builds
        r = job(w, "verify", OWN[0][0], os.path.join(CUDA, OWN[0][1]), sanitize=["memcheck"])
        check("sanitize " + OWN[0][1], r.get("ok") and (r.get("sanitizer") or {}).get("ok") is True,
              summary(r) + " sanitizer %s" % json.dumps(r.get("sanitizer"))[:300])
        path = os.path.join(CUDA, CUBLAS[1])
        for library, want in (("own", False), ("some", True), ("any", True)):
            r = job(w, "benchmark", CUBLAS[0], path, library=library)
            share = r.get("own_share")
            check("library %s %s" % (library, CUBLAS[1]),
                  r.get("ok") is want and (want or r.get("code") == "EFALLBACK")
                  and share is not None and share < 0.5 and r.get("library_kernels"),
                  summary(r))
    finally:
        w.close()
    parallel(Worker, env, cold)
    no_gpu_in_the_step()
    shutil.rmtree(root, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 1 if failures else 0


def parallel(Worker, env, cold):
    """4 workers, 4 sources none of them built before (a new comment in each), at once."""
    with open(os.path.join(CUDA, "relu_signed.py")) as f:
        text = f.read()
    stamp = "%d" % time.time_ns()
    sources = [text.replace("#include <torch/extension.h>",
                            "#include <torch/extension.h>\n// %s-%d" % (stamp, i)) for i in range(4)]
    workers = [Worker("0", env=env) for _ in range(4)]
    results = [None] * 4
    try:
        def one(i):
            results[i] = job(workers[i], "verify", "relu_signed.py", sources[i])
        t0 = time.monotonic()
        threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.monotonic() - t0
    finally:
        for w in workers:
            w.close()
    builds = [(r or {}).get("compile") or {} for r in results]
    longest = max(b.get("s") or 0 for b in builds)
    one_cold = cold[0] if cold else 0
    check("parallel 4 builds", all((r or {}).get("ok") for r in results)
          and all(b.get("cached") is False for b in builds) and longest <= 1.5 * one_cold,
          "one cold build %.1f s (relu_signed); 4 at once: longest build %.1f s, jobs' wall %.1f s"
          % (one_cold, longest, wall))


def no_gpu_in_the_step():
    """The compile step's child (what a candidate's top level runs in before the lease) sees no
    GPU and cannot open the GPU's device files for writing (Landlock), in this process's jail."""
    sys.path.insert(0, os.path.join(ROOT, "src", "gpu", "eval"))
    from kagent_eval.child import child_compile
    from kagent_eval.sandbox import sandbox
    from kagent_eval.worker import compile_step
    source = ("import os, torch\n# load_inline\ntry:\n"
              "    open('/dev/nvidiactl', 'r+b').close()\n    dev = 'writable'\n"
              "except OSError as e:\n    dev = type(e).__name__\n"
              "raise RuntimeError('devices %d nvidiactl %s' % (torch.cuda.device_count(), dev))\n")
    spec = {"problem": os.path.join(PROBLEMS, "relu_signed.py"), "candidate": source,
            "dtype": "fp32", "threads": 1, "cuda_arch": compile_step.cuda_arch()}
    out = sandbox.run_child(child_compile.run, (spec,), {})
    note = ((out.first("compiled_sources")[0] or {}).get("top_level_error") or "")
    check("no GPU in the compile step", "devices 0 " in note and "writable" not in note,
          "%s (failure: %s)" % (note, out.failure))


if __name__ == "__main__":
    sys.exit(main())
