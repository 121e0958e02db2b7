"""The compile step, worker side (child_compile.py says what it is and why): for a candidate that
builds C++/CUDA with load_inline, the job's GPU's architecture, the compile child forked in the
candidate's sandbox without a GPU, and its report read into the result (ECOMPILE)."""
import os
import subprocess

from ..child import child_compile, ext_build
from ..common import loader
from ..judge import verdict
from ..sandbox import sandbox

_arch = {}


def cuda_arch():
    """The worker's GPU's compute capability ("9.0"), or None (CPU, or no nvidia-smi)."""
    device = os.environ.get("CUDA_VISIBLE_DEVICES")
    if not device:
        return None
    if device not in _arch:
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap",
                                  "--format=csv,noheader", "-i", device],
                                 capture_output=True, text=True, timeout=20)
            _arch[device] = out.stdout.strip().splitlines()[0] if out.returncode == 0 else None
        except (OSError, subprocess.SubprocessError, IndexError):
            _arch[device] = None
    return _arch[device]


def gate(c):
    """The worker's step (job_gates.GATES), for a candidate that uses load_inline."""
    spec, result = c.spec, c.result
    source, _ = loader.source_of(spec["candidate"])
    if not ext_build.uses_load_inline(source):
        return None
    spec["cuda_arch"] = cuda_arch() if c.ev.cuda else None  # the candidate's process's too
    if not c.ev.cuda:
        # imported once in a CPU worker, so each child forked from here on finds it loaded: its
        # import (setuptools among it) is most of a build found in the cache. Not on a GPU: its
        # import asks torch.cuda.is_available(), which starts CUDA's driver, and a worker that
        # did cannot fork children that use the GPU
        import torch.utils.cpp_extension  # noqa: F401
    out = sandbox.run_child(child_compile.run, (spec,), spec["timeouts"])
    seconds = out.stage_durations().get(ext_build.STAGE, out.elapsed)
    began = next((o["t"] for o, _ in out.messages if o.get("stage") == ext_build.STAGE), None)
    report, _ = out.first("compiled_sources")
    builds = [b for b in (report or {}).get("builds") or () if isinstance(b, dict)]
    # began, ended: on stage_at's clock, so that a check can see it ended before the first gate
    result["compile"] = {"s": seconds, "builds": builds, "began": began,
                         "ended": began + seconds if began is not None else None,
                         "cached": bool(builds) and all(b.get("cached") for b in builds)}
    result["stage_s"] = {ext_build.STAGE: seconds}  # the candidate's stages join it (job_gates)
    failed = next((b for b in builds if b.get("error")), None)
    if failed is not None:
        return verdict.fail(result, "load", "ECOMPILE", "%s: %s" % (failed.get("name"),
                                                                 failed["error"]))
    if out.failure:
        code, message = out.failure
        return verdict.fail(result, "load", code, "while building its extensions: " + message)
    err, _ = out.first("error")
    if report is None and err is not None:  # before the candidate's code ran: torch's import
        return verdict.fail(result, "load", "ELOAD", "the compile step failed: %s: %s" % (
            err.get("error_type"), err.get("message")))
    return None
