#!/usr/bin/env python3
"""GPU check of the candidate sandbox (src/gpu/eval/README.md, "Sandbox") through real workers.

    python3 tests/gpu/sandbox_gpu_check.py [--part triton,hostile,users] [--memory-mb 8192]

triton: a Triton candidate is evaluated (verify, audit, benchmark with the eager and torch.compile
baselines, profile) and checked by compute-sanitizer's memcheck by a sandboxed worker and by one
with KAGENT_EVAL_SANDBOX=0, side by side: both must pass with the same profile and sanitizer
outcomes; the sandboxed one writes Triton's cache under its per-user folder and nothing under
~/.triton. hostile: the CPU-mode hostile candidates
(tests/fixtures/adversarial/cpu_*: environment dump, ancestors' environ, a setsid daemon, host
memory past the limit, writes outside the job folder, a private file, a network connection) on the
GPU worker, each caught, no fake key (planted in the worker's environment) in any result or the
worker's log, no process left, and a Triton job passing after each. users: a second OS user
(made with useradd; root only) evaluates at the same time.
Prints one line per check; writes JSON to $OUT/sandbox_gpu_check.json when OUT is set.
Exit status: 0 all checks passed, 1 a check failed, 77 skipped (no CUDA here).
"""
import argparse
import glob
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "eval"))
from worker_client import Worker, children_of, fixture_text, have_cuda, processes_with  # noqa: E402
from check_table import Checks  # noqa: E402

EV = os.path.join(ROOT, "tests", "fixtures", "eval")
PROBLEM = "gpu_relu_problem.py"
TRITON = os.path.join(EV, "gpu_relu_triton.py")
FAKE_KEYS = {name: "fake-%s-%s" % (name.lower(), secrets.token_hex(16)) for name in (
    "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "KAGENT_LLM_KEY")}


def listing(path):
    return sorted(os.listdir(path)) if os.path.isdir(path) else []




def evaluate_triton(w):
    t0 = time.time()
    r = w.job("evaluate", PROBLEM, TRITON, bench={"min_time": 0.5, "baselines": ["eager", "compile"]})
    return r, time.time() - t0


def sanitize_triton(w):
    """compute-sanitizer on the Triton candidate (it talks to its target over the loopback)."""
    reply = w.request("sanitize", {"problem": os.path.join(EV, PROBLEM), "candidate": TRITON,
                                   "tools": ["memcheck"]}, timeout=900)
    return reply.get("result") or {"ok": None, "error": reply.get("error")}


def part_triton(c, memory_mb):
    home_triton = os.path.expanduser("~/.triton/cache")
    before = listing(home_triton)
    results = {}
    # KAGENT_EVAL_SANDBOX=1 is the default's confinement (auto), here with a smaller memory limit
    for label, env in (("sandbox", {"KAGENT_EVAL_SANDBOX": "1", "KAGENT_EVAL_MEMORY_MB": str(memory_mb)}),
                       ("open", {"KAGENT_EVAL_SANDBOX": "0"})):
        w = Worker(0, env=env)
        try:
            print("worker (%s): %s" % (label, json.dumps(w.ready.get("sandbox"))), flush=True)
            r, wall = evaluate_triton(w)
            results[label] = (r, wall, w.ready["sandbox"], sanitize_triton(w))
        finally:
            w.close()
    (r, wall, status, san), (o, owall, _, osan) = results["sandbox"], results["open"]
    tm, otm = r.get("time_ms") or {}, o.get("time_ms") or {}
    c.add("triton", "evaluate passes in the sandbox", r.get("ok"),
          "median %s ms (open: %s ms), compile baseline %s ms, %.0f s (open %.0f s); %s" % (
              tm.get("median"), otm.get("median"), r.get("compile_ms"), wall, owall, r.get("error") or ""),
          status=status, result={k: r.get(k) for k in ("ok", "error", "time_ms", "eager_ms", "compile_ms", "flags", "stage_s")},
          open_result={k: o.get(k) for k in ("ok", "error", "time_ms", "eager_ms", "compile_ms", "flags", "stage_s")})
    c.add("triton", "torch.compile baseline runs in the sandbox", r.get("compile_ms") is not None or o.get("compile_ms") is None,
          "compile_ms %s (open: %s)" % (r.get("compile_ms"), o.get("compile_ms")))
    sprof, oprof = r.get("profile") or {}, o.get("profile") or {}
    c.add("triton", "profile as without the sandbox", bool(sprof.get("ok")) == bool(oprof.get("ok")),
          "sandbox: %s; open: %s" % (sprof.get("ok") or sprof.get("error"), oprof.get("ok") or oprof.get("error")))
    c.add("triton", "compute-sanitizer as without the sandbox", san.get("ok") == osan.get("ok"),
          "sandbox: ok=%s %s; open: ok=%s %s" % (san.get("ok"), (san.get("error") or "")[:120],
                                                 osan.get("ok"), (osan.get("error") or "")[:120]),
          sanitize=san, open_sanitize=osan)
    # the candidates' cache is content-addressed: an entry per hash of the job's sources
    # (candidate_cache.py), each with its own triton/ folder
    cache = os.path.join(status["root"], "cache", "candidate", "*", "triton")
    entries, after = glob.glob(os.path.join(cache, "*")), listing(home_triton)
    c.add("triton", "Triton's cache is the candidate's sources' entry", entries and after == before,
          "%d entries in %s; ~/.triton/cache %d -> %d" % (len(entries), cache, len(before), len(after)))
    c.add("triton", "host memory limit in force", status.get("memory_mb") == memory_mb,
          "memory_mb %s; missing: %s" % (status.get("memory_mb"), "; ".join(status.get("missing") or []) or "none"))


def part_hostile(c, memory_mb):
    fd, log = tempfile.mkstemp(prefix="kagent-sandbox-gpu-", suffix=".log")
    os.close(fd)
    w = Worker(0, env=dict(FAKE_KEYS, KAGENT_EVAL_MEMORY_MB=str(memory_mb)), log=log)
    status = w.ready["sandbox"]
    token = "kagent-escape-" + secrets.token_hex(8)
    folder = tempfile.mkdtemp(prefix="kagent-sandbox-gpu-")
    secret_file = os.path.join(folder, ".env")
    with open(secret_file, "w") as f:
        f.write("OPENAI_API_KEY=%s\n" % FAKE_KEYS["OPENAI_API_KEY"])
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    pids = "%d,%d" % (w.proc.pid, os.getpid())
    hog = fixture_text("adversarial", "cpu_memory_hog.py").replace("HOG_MB = 3072", "HOG_MB = %d" % (2 * memory_mb))
    cases = [
        ("environment dump", fixture_text("adversarial", "cpu_env_leak.py"), lambda r: r.get("code") == "ELOAD" and "PATH=" in r["error"]),
        # without namespaces only the worker is unreadable (not dumpable); this check's own
        # process is dumpable, and holds no key
        ("ancestors' environ", fixture_text("adversarial", "cpu_parent_environ.py", PIDS=pids),
         lambda r: r.get("code") == "ELOAD" and all("pid %s refused" % p in r["error"] for p in (
             pids.split(",") if status["processes"].startswith("namespace") else [str(w.proc.pid)]))),
        ("setsid daemon", fixture_text("adversarial", "cpu_setsid_escape.py", TOKEN=token),
         lambda r: r.get("ok") and not processes_with(token)),
        ("host memory past the limit", hog, lambda r: r.get("code") == "EMEMORY"),
        ("writes outside the job folder", fixture_text("adversarial", "cpu_write_outside.py", TOKEN=token),
         lambda r: r.get("code") == "ELOAD" and r["error"].count("Permission denied") == 3),
        ("a private file", fixture_text("adversarial", "cpu_read_secret_file.py", PATH=secret_file),
         lambda r: r.get("code") == "ELOAD" and "Permission denied" in r["error"]),
        ("network connection", fixture_text("adversarial", "cpu_network.py", PORT=listener.getsockname()[1]),
         lambda r: r.get("code") == "ELOAD" and ("Network is unreachable" in r["error"]
                                                 or "Connection refused" in r["error"])),
    ]
    try:
        for name, text, caught in cases:
            t0 = time.time()
            r = w.job("verify", PROBLEM, text)
            with open(log) as f:
                texts = json.dumps(r) + f.read()
            leaked = [k for k, v in FAKE_KEYS.items() if v in texts]
            left = len(children_of(w.proc.pid)) > 1
            good = w.job("verify", PROBLEM, TRITON)
            passed = caught(r) and not leaked and not left and good.get("ok")
            c.add("hostile", name, passed, "%s%s%s; next Triton job ok=%s; %.0f s" % (
                (r.get("error") or "ok")[:110].replace("\n", " | "), " LEAKED %s" % leaked if leaked else "",
                " PROCESS LEFT" if left else "", good.get("ok"), time.time() - t0), status=status)
        try:
            listener.accept()
            c.add("hostile", "no connection reached the listener", False, "a candidate connected")
        except socket.timeout:
            c.add("hostile", "no connection reached the listener", True, "none")
        for path in (os.path.expanduser("~"), "/tmp"):
            probe = os.path.join(path, "kagent_sandbox_probe_" + token)
            c.add("hostile", "nothing written to " + path, not os.path.exists(probe), probe)
    finally:
        w.close()
        listener.close()
        shutil.rmtree(folder)
        os.unlink(log)


def part_users(c):
    if os.geteuid() != 0 or not shutil.which("useradd"):
        c.add("users", "second user (skipped)", True, "needs root and useradd")
        return
    user = "kagent-sbx-%s" % secrets.token_hex(3)
    subprocess.run(["useradd", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", user],
                   check=True)
    workers = []
    try:
        try:
            workers = [Worker(0), Worker(0, user=user)]
        except Exception as e:
            c.add("users", "second user starts a worker", False, "%s: %s (can %s read %s and the Python?)" % (
                type(e).__name__, e, user, ROOT))
            return
        results = [None, None]

        def run(i):
            results[i] = workers[i].job("verify", PROBLEM, TRITON)
        threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        roots = [w.ready["sandbox"]["root"] for w in workers]
        c.add("users", "two users evaluate at once", all(r and r.get("ok") for r in results) and roots[0] != roots[1],
              "roots %s; %s" % (roots, [(r or {}).get("error") for r in results]))
    finally:
        for w in workers:
            w.close()
        if len(workers) == 2:
            shutil.rmtree(workers[1].ready["sandbox"]["root"], ignore_errors=True)
        subprocess.run(["userdel", user], check=False)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", default="triton,hostile,users")
    ap.add_argument("--memory-mb", type=int, default=8192,
                    help="the candidates' host memory limit (the hostile candidate takes twice this)")
    args = ap.parse_args()
    if not have_cuda():
        print("SKIP: no CUDA device here")
        return 77
    c = Checks("sandbox_gpu_check.json")
    parts = args.part.split(",")
    if "triton" in parts:
        part_triton(c, args.memory_mb)
    if "hostile" in parts:
        part_hostile(c, args.memory_mb)
    if "users" in parts:
        part_users(c)
    print("RESULT:", "PASS" if c.ok else "FAIL")
    return 0 if c.ok else 1


if __name__ == "__main__":
    sys.exit(main())
