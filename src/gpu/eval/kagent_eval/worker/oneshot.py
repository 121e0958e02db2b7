"""One candidate verified and timed the way kagent-rt's pool does it, from Python or a shell.

    kagent-eval check problem.py kernel.py [--dtype fp32|bf16|fp16] [--device cpu|0] [--json]
                      [--tolerance NAME] [--python PATH]
    python3 -m kagent_eval check ...
    kagent_eval.check("problem.py", "kernel.py", dtype="fp32") -> the result dict

It starts the evaluator worker (``python -m kagent_eval.worker``, this python) as the pool does
and sends it the job the agents send for a start kernel: ``evaluate`` (static checks, the
reference, verification, audit, timing) next to the eager and torch.compile baselines. So the
verdict, time and speedups are the pool's, from the same code and sandbox; only the process that
asks differs. The result is the worker's, as kagent.gpu returns it (docs/lua-api.md, "kagent.gpu").
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

from .. import __version__
from ..common import job_defaults
from ..judge import compare


def _default_device():
    """"0" where nvidia-smi lists a GPU, else "cpu" (CPU mode), as the agents choose."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return "cpu"
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return "cpu"
    return "0" if out.returncode == 0 and out.stdout.startswith("GPU ") else "cpu"


def job_for(problem, kernel_source, dtype="fp32", tolerance=None, timeout=None):
    """The pool's evaluate job for a start kernel as the agents send it (agents/run/init.lua
    r.job, agents/search/confirm.lua with_baselines): timed beside the reported baselines, under
    the evaluator's default tolerance unless one is named; the other fields keep the evaluator's
    defaults (job_defaults.py)."""
    job = {"problem": os.path.abspath(problem), "candidate": kernel_source, "dtype": dtype,
           "tolerance": tolerance or job_defaults.DEFAULT_TOLERANCE,
           "bench": {"baselines": list(job_defaults.REPORTED_BASELINES)}}
    if timeout:
        job["timeout"] = timeout
    return job


class WorkerError(RuntimeError):
    """The worker did not start or did not answer (not a verdict on the candidate)."""


def check(problem, kernel, dtype="fp32", device=None, tolerance=None, timeout=None, python=None):
    """Verifies and times `kernel` (a path, or source text) against `problem` (a path) in a
    worker of its own. Returns the worker's result: ok, stage, error, time_ms {median, p10,
    p90, ...}, eager_ms, compile_ms, speedup_vs_eager, ... Raises WorkerError when no worker
    starts (a python without torch, for instance)."""
    source = kernel
    if os.path.isfile(kernel):
        with open(kernel, encoding="utf-8") as f:
            source = f.read()
    device = device or _default_device()
    env = dict(os.environ)
    pkg_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = pkg_parent + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    argv = [python or sys.executable, "-m", "kagent_eval.worker", "--device", str(device)]
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=env, text=True)
    try:
        ready = _read(p)
        if not (isinstance(ready, dict) and ready.get("ready")):
            raise WorkerError("the evaluator worker did not start: %s" % _stderr_tail(p))
        if ready.get("version") != __version__:
            raise WorkerError("the worker is version %s, this package %s" % (ready.get("version"), __version__))
        p.stdin.write(json.dumps({"id": 1, "op": "evaluate",
                                  "job": job_for(problem, source, dtype, tolerance, timeout)}) + "\n")
        p.stdin.flush()
        reply = _read(p)
        if not isinstance(reply, dict):
            raise WorkerError("the evaluator worker died: %s" % _stderr_tail(p))
        if not reply.get("ok"):
            stage = "request" if reply.get("code") in ("EBADREQ", "EPARSE") else "worker"
            return {"ok": False, "stage": stage, "error": reply.get("error"), "code": reply.get("code")}
        result = reply["result"]
        result["device"] = ready.get("device")
        return result
    finally:
        try:
            p.stdin.write(json.dumps({"id": 2, "op": "shutdown"}) + "\n")
            p.stdin.close()
        except (BrokenPipeError, ValueError, OSError):
            pass
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _read(p):
    """The next protocol line as JSON, or None at the end of output."""
    while True:
        line = p.stdout.readline()
        if not line:
            return None
        try:
            return json.loads(line)
        except ValueError:
            continue


def _stderr_tail(p):
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
    text = (p.stderr.read() or "").strip()
    missing = [l for l in text.splitlines() if l.startswith("ModuleNotFoundError")]
    if missing:
        return "%s (the python %s lacks it: run with a python that has torch)" % (missing[-1], p.args[0])
    return text[-800:] or "no output"


def summary(r):
    """The result in a few lines for a terminal."""
    if r.get("code") == "ENOISY":  # no verdict on the kernel (noise.py): check it again later
        return "not measured: %s" % r.get("error")
    if not r.get("ok"):
        return "not verified: stage %s: %s" % (r.get("stage"), r.get("error"))
    t = r.get("time_ms") or {}
    lines = ["verified: %.4f ms median (p10 %.4f, p90 %.4f) on %s" % (
        t.get("median", float("nan")), t.get("p10", float("nan")), t.get("p90", float("nan")), r.get("device"))]
    for name in job_defaults.REPORTED_BASELINES:
        ms = r.get(name + "_ms")
        if isinstance(ms, (int, float)):
            lines.append("  %-8s %.4f ms: %.2fx" % (name, ms, ms / t["median"]))
    if t.get("hardened"):
        # the first timing raised a flag, so the re-measure's figure stands (remeasure.py): one
        # method no longer holds for these speedups, and the reader is told
        lines.append("  (the figure is the hardened re-measure's, new inputs before every call, as the first "
                     "timing raised a flag; the baselines were timed on rotated inputs)")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="kagent-eval", description="kagent-rt's evaluator from a shell")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="verify and time one candidate the way kagent-rt's pool does")
    c.add_argument("problem", help="a KernelBench problem file (Model, get_inputs, get_init_inputs)")
    c.add_argument("kernel", help="the candidate (ModelNew)")
    c.add_argument("--dtype", default="fp32", choices=["fp32", "bf16", "fp16"])
    c.add_argument("--device", default=None, help="cpu or a GPU index (default: GPU 0 where there is one)")
    c.add_argument("--tolerance", default=job_defaults.DEFAULT_TOLERANCE, choices=sorted(compare.TOLERANCE_SETS),
                   help="correctness tolerance (default %(default)s)")
    c.add_argument("--json", action="store_true", help="print the worker's result as JSON")
    c.add_argument("--python", default=None, help="the python that runs the worker (default this one)")
    a = ap.parse_args(argv)
    for path, what in ((a.problem, "problem"), (a.kernel, "kernel")):
        if not os.path.isfile(path):
            ap.exit(2, "kagent-eval: cannot read the %s file %s\n" % (what, path))
    try:
        r = check(a.problem, a.kernel, dtype=a.dtype, device=a.device, tolerance=a.tolerance, python=a.python)
    except WorkerError as e:
        sys.stderr.write("kagent-eval: %s\n" % e)
        return 3
    print(json.dumps(r, indent=1, sort_keys=True, default=str) if a.json else summary(r))
    return 0 if r.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
