"""Nsight Compute CLI fallback: profile one forward with `ncu` and parse its CSV into the
same result shape as profiling.profile (backend "ncu").

Costs a fresh interpreter (torch, Triton, CUDA context) per call, about 10 s: use it when the
CUPTI library cannot run, and to cross-check it.
"""
import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from . import ncu_metrics
from .profiler_error import ProfilerError

_EVAL_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))  # above kagent_eval/


def ncu_path():
    return os.environ.get("KAGENT_NCU") or shutil.which("ncu") or (
        "/usr/local/cuda/bin/ncu" if os.path.exists("/usr/local/cuda/bin/ncu") else None)


def ncu_available():
    path = ncu_path()
    return (True, path) if path else (False, "ncu not found on PATH (set KAGENT_NCU)")


def ncu_command(metrics, target_argv, ncu=None, extra=()):
    """Argument vector: only the forward between cudaProfilerStart/Stop is profiled, with the
    GPU clocks left as they run (no locking to base clock), values in base units. `extra` adds
    ncu options (e.g. ["--replay-mode", "application"]) before the target."""
    return [ncu or ncu_path() or "ncu", "--clock-control", "none", "--profile-from-start", "off",
            "--target-processes", "all", "--csv", "--page", "raw", "--print-units", "base",
            "--metrics", ",".join(metrics)] + list(extra) + list(target_argv)


def _number(text):
    text = (text or "").strip()
    if text in ("", "n/a", "N/A", "nan"):
        return None
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def _dims(text):
    nums = [int(x) for x in re.findall(r"\d+", text or "")]
    return nums if len(nums) == 3 else None


def parse_csv(text, metrics=None):
    """Rows of an `ncu --csv` report (raw page: one row per kernel; or details page: one row per
    metric) -> [{name, grid, block, stream, metrics: {...}}] in launch order."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    if not lines:
        return []
    reader = list(csv.reader(io.StringIO("\n".join(lines))))
    header = reader[0]
    body = reader[1:]
    if "Metric Name" in header:
        return _parse_long(header, body)
    # The raw page's second row holds the units.
    if body and not _number(body[0][header.index("ID")] if "ID" in header else "x"):
        body = body[1:]
    skip = {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
            "Block Size", "Grid Size", "Device", "CC", "Kernel Time"}
    rows = []
    for rec in body:
        if len(rec) != len(header):
            continue
        cell = dict(zip(header, rec))
        values = {}
        for key, val in cell.items():
            if key in skip or (metrics and key not in metrics):
                continue
            num = _number(val)
            if num is not None:
                values[key] = num
        rows.append(_row(cell, values))
    return rows


def _parse_long(header, body):
    by_id = {}
    for rec in body:
        if len(rec) != len(header):
            continue
        cell = dict(zip(header, rec))
        row = by_id.get(cell.get("ID"))
        if row is None:
            row = by_id[cell.get("ID")] = _row(cell, {})
        num = _number(cell.get("Metric Value"))
        if num is not None:
            row["metrics"][cell["Metric Name"]] = num
    return [by_id[k] for k in sorted(by_id, key=lambda k: int(_number(k) or 0))]


def _row(cell, values):
    stream = _number(cell.get("Stream"))
    return {"name": cell.get("Kernel Name", ""), "grid": _dims(cell.get("Grid Size")),
            "block": _dims(cell.get("Block Size")),
            "stream": int(stream) if stream is not None else None, "metrics": values}


def result_from_rows(rows, metrics, elapsed_s, ncu_version=None, passes=None):
    """The profiling.profile result shape for ncu rows."""
    for row in rows:
        t = row["metrics"].get(ncu_metrics.TIME_METRIC)
        row["duration_ms"] = t * 1e-6 if t is not None else None
    if any(r["duration_ms"] is None for r in rows):
        for r in rows:  # no time metric: weight kernels equally rather than not at all
            r["duration_ms"] = r["duration_ms"] or 1.0
    seen = set()
    for r in rows:
        seen.update(r["metrics"])
    return ncu_metrics.profile_result(
        rows, passes, {"ncu_version": ncu_version}, backend="ncu",
        unsupported=[m for m in metrics if rows and m not in seen], profile_s=elapsed_s)


def ncu_version(ncu=None):
    try:
        out = subprocess.run([ncu or ncu_path() or "ncu", "--version"], capture_output=True,
                             text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"Version\s+([\w.]+)", out)
    return m.group(1) if m else None


def profile_with_ncu(problem_path, candidate_path, job=None, metrics="full", timeout=600,
                     python=None, ncu_args=()):
    """Profile `candidate_path` (None: the reference) on the problem's inputs under ncu.

    `job` may carry dtype, seed, device, warmup; `ncu_args` are extra ncu options.
    Raises ProfilerError."""
    ok, why = ncu_available()
    if not ok:
        raise ProfilerError("ENOTSUP", why)
    names = ncu_metrics.resolve(metrics)
    spec = dict(job or {})
    spec.update({"problem": os.path.abspath(problem_path),
                 "candidate": os.path.abspath(candidate_path) if candidate_path else None})
    fd, job_path = tempfile.mkstemp(prefix="kagent_ncu_", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(spec, f)
    env = dict(os.environ)
    env["PYTHONPATH"] = _EVAL_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    argv = ncu_command(names, [python or sys.executable, "-m", "kagent_eval.profile.ncu_target",
                               job_path], extra=ncu_args)
    started = time.perf_counter()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise ProfilerError("ETIMEDOUT", "ncu did not finish in %d s" % timeout)
    finally:
        os.unlink(job_path)
    elapsed = time.perf_counter() - started
    rows = parse_csv(proc.stdout, set(names))[int(spec.get("preroll", 0)):]
    if proc.returncode != 0 or not rows:
        tail = (proc.stderr or proc.stdout or "")[-2000:]
        raise ProfilerError("ENCU", "ncu exit %d, %d kernels profiled: %s"
                            % (proc.returncode, len(rows), tail.strip()))
    log = proc.stderr + proc.stdout
    result = result_from_rows(rows, names, elapsed, ncu_version(), passes_from_log(log))
    result["metadata"]["ncu_log_tail"] = "\n".join(
        ln for ln in log.splitlines() if ln.startswith("==PROF=="))[-1500:]
    return result


def passes_from_log(text):
    """Replay passes from ncu's log: the most any kernel needed where it prints
    "==PROF== Profiling ... - N passes" (a terminal), else, in application replay, one process
    connection per pass; None when the log does not say."""
    counts = [int(n) for n in re.findall(r"==PROF==.*?-\s*(\d+)\s+pass", text or "")]
    if counts:
        return max(counts)
    connects = len(re.findall(r"==PROF== Connected to process", text or ""))
    return connects if connects > 1 else None
