"""compute-sanitizer (from the CUDA toolkit) on one forward of a candidate: memcheck finds
out-of-bounds and misaligned accesses, racecheck shared-memory races. A kernel can pass every
output comparison and still read past its buffers (the read lands in memory that happens to be
mapped) or race in shared memory (the race happens to resolve right); the tools see both.

The forward is the program the Nsight Compute fallback runs (``ncu_target``). PyTorch's caching
allocator is turned off in it, so each tensor is its own allocation and an access past one is
outside every allocation, where memcheck can see it. PyTorch's own kernels (inputs, copies) are
left out of the check by name.

The tools run at once, each in its own process. racecheck costs about as much as the work it
checks (69 s on the H200 for KernelBench L1 #4 as stated, 9 s at 1/16 of it: docs/agents.md),
so it runs on the problem made RACECHECK_SHRINK times smaller (inputs.shrunk_sizes), and its
verdict there stands only when it ran the very kernels memcheck ran at full size: the same
compiled fingerprint, of Triton code. Otherwise (other kernels, no Triton code, the shrunk
forward failed, memcheck did not run) racecheck runs again at full size. A tool that could not
judge while running beside another (out of GPU memory, say) runs again alone.

    run_child(channel, spec)   sandboxed child: runs the tools, sends {"type": "sanitize"}
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

TOOLS = ("memcheck", "racecheck")
RACECHECK_SHRINK = 16
ERROR_EXIT = 97
_EVAL_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))  # above kagent_eval/
_SUMMARY = re.compile(r"ERROR SUMMARY:\s*(\d+)\s+error")
_RACE_SUMMARY = re.compile(r"RACECHECK SUMMARY:\s*(\d+)\s+hazard")


def sanitizer_path():
    return os.environ.get("KAGENT_COMPUTE_SANITIZER") or shutil.which("compute-sanitizer") or (
        "/usr/local/cuda/bin/compute-sanitizer"
        if os.path.exists("/usr/local/cuda/bin/compute-sanitizer") else None)


def command(tool, target_argv, exclude_torch=True, exe=None):
    argv = [exe or sanitizer_path(), "--tool", tool, "--error-exitcode", str(ERROR_EXIT),
            "--print-limit", "20"]
    if exclude_torch:
        argv += ["--kernel-name-exclude", "kns=at::"]
    return argv + list(target_argv)


def errors_in(text):
    """Errors the tool counted in its summary line, or None when it printed none."""
    m = _SUMMARY.search(text or "")
    if m:
        return int(m.group(1))
    m = _RACE_SUMMARY.search(text or "")
    return int(m.group(1)) if m else None


def run_tool(tool, job_path, timeout, python):
    """{ok, errors, seconds, report} for one tool; ok is None when the tool could not judge."""
    env = dict(os.environ)
    env["PYTHONPATH"] = _EVAL_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
    target = [python, "-m", "kagent_eval.profile.ncu_target", job_path]
    started = time.monotonic()
    for exclude in (True, False):  # older tools have no kernel-name filter: check everything
        try:
            proc = subprocess.run(command(tool, target, exclude), capture_output=True, text=True,
                                  timeout=timeout, env=env, start_new_session=True)
        except subprocess.TimeoutExpired:
            return {"ok": None, "errors": None, "seconds": timeout,
                    "report": "ETIMEDOUT: %s did not finish in %d s" % (tool, timeout)}
        log = (proc.stdout or "") + (proc.stderr or "")
        if exclude and "kernel-name-exclude" in log and proc.returncode not in (0, ERROR_EXIT):
            continue
        break
    errors = errors_in(log)
    lines = [ln for ln in log.splitlines() if ln.startswith("=========")]
    report = "\n".join(lines[:60])[-4000:]
    seconds = time.monotonic() - started
    if proc.returncode == ERROR_EXIT or (errors or 0) > 0:
        return {"ok": False, "errors": errors, "seconds": seconds, "report": report}
    if proc.returncode != 0 or errors is None:
        return {"ok": None, "errors": errors, "seconds": seconds,
                "report": "the forward did not run under %s (exit %d): %s" % (
                    tool, proc.returncode, (report or log[-2000:]).strip())}
    return {"ok": True, "errors": 0, "seconds": seconds, "report": report}


def run_tools(tools, job, timeout, python):
    """{tool: run_tool's result, with "sizes" (the size constants the problem ran at: {} as
    stated, None where the forward did not finish) and "compiled" (the compiled fingerprint of
    what ran)} for each tool asked. A racecheck that ran shrunk and was not kept says so under
    "shrunk"."""
    full = dict(job, shrink=None)
    shrink = "racecheck" in tools and "memcheck" in tools
    runs = {t: dict(job, shrink=RACECHECK_SHRINK if t == "racecheck" and shrink else None)
            for t in tools}
    out = _at_once(runs, timeout, python)
    for t, r in out.items():  # a tool that could not judge may have lacked what the other held
        if r["ok"] is None and len(runs) > 1 and not (t == "racecheck" and shrink):
            out[t] = _run_one(t, full, timeout, python)
    if shrink and out["memcheck"]["ok"] is not False:  # else rejected whatever racecheck says
        race, mem = out["racecheck"], out["memcheck"]
        if race["sizes"] == {}:  # nothing to shrink: it ran as stated
            keep = race["ok"] is not None
        else:
            keep = (race["sizes"] is not None and race["ok"] is not None
                    and race["compiled"] is not None and race["compiled"] == mem["compiled"])
        if not keep:
            out["racecheck"] = _run_one("racecheck", full, timeout, python)
            if race["sizes"] != {}:  # it ran, or tried to run, shrunk
                out["racecheck"]["shrunk"] = {k: race[k] for k in ("ok", "sizes", "compiled",
                                                                   "seconds")}
    return out


def _run_one(tool, job, timeout, python):
    fd, job_path = tempfile.mkstemp(prefix="kagent_sanitize_", suffix=".json")
    report_path = job_path[:-len(".json")] + ".ran.json"
    with os.fdopen(fd, "w") as f:
        json.dump(dict(job, report=report_path), f)
    try:
        result = run_tool(tool, job_path, timeout, python)
        ran = _read_report(report_path)
    finally:
        for path in (job_path, report_path):
            if os.path.exists(path):
                os.unlink(path)
    result["sizes"] = ran.get("sizes") if isinstance(ran.get("sizes"), dict) else None
    result["compiled"] = ran.get("compiled")
    return result


def _read_report(path):
    """What the target says it ran; {} where it wrote nothing readable (its process runs the
    candidate's code, so the file is read as untrusted text)."""
    try:
        with open(path) as f:
            ran = json.load(f)
    except (OSError, ValueError):
        return {}
    return ran if isinstance(ran, dict) else {}


def _at_once(runs, timeout, python):
    with ThreadPoolExecutor(len(runs)) as pool:
        futures = {t: pool.submit(_run_one, t, j, timeout, python) for t, j in runs.items()}
        return {t: f.result() for t, f in futures.items()}


def run_child(ch, spec):
    ch.stage("sanitize")
    exe = sanitizer_path()
    if not exe:
        ch.send({"type": "sanitize", "result": {
            "ok": None, "error": "ENOTSUP: compute-sanitizer not found (set "
                                 "KAGENT_COMPUTE_SANITIZER or put the CUDA toolkit's bin on PATH)"}})
        return
    job = {"problem": spec["problem"], "candidate": spec["candidate"], "dtype": spec["dtype"],
           "seed": spec["seed"], "device": 0, "warmup": 0}
    tools = run_tools(spec["tools"], job, spec["tool_timeout"], sys.executable)
    verdicts = [t["ok"] for t in tools.values()]
    ok = False if False in verdicts else (None if None in verdicts else True)
    ch.send({"type": "sanitize", "result": {"ok": ok, "tools": tools}})
