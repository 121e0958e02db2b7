"""The compile step: a candidate that builds C++/CUDA with `load_inline` (KernelBench's form) has
its extensions built before its job asks for the GPU's lease.

A build is CPU work (nvcc: 40-280 s cold). Done where the candidate's module is first imported,
in the candidate's process after its first gate, it held the lease shared all that time, and
every other job's timing on the GPU waited for it. So, for a candidate whose source names
load_inline (ext_build.uses_load_inline), the worker first runs this child:

  - a candidate's sandbox (the same jail, job view, limits and cache entry as the candidate's
    process: it runs the candidate's code) with no GPU (jail.enter's role "compile");
  - it imports the candidate: its top level runs, and each load_inline builds into the job's
    extension cache (ext_build.py), with TORCH_CUDA_ARCH_LIST the job's GPU's (nvidia-smi's
    compute capability, as the worker reads the GPU without starting CUDA);
  - what the top level does after its builds may fail here (a tensor made on the GPU it cannot
    see): that is the candidate's process's to report, not this step's.

The candidate's process then imports the same module and finds every build done (under a second).
A build that fails ends the job at stage "load", ECOMPILE, with the compiler's errors cut
(compiler_errors.py). The step's seconds are the result's `stage_s.compile_source` and its
builds `compile = {s, cached, builds = {{name, cached, s}}}`; a worker's other jobs and the other
workers' keep the GPU meanwhile. This module is the child's side; the worker's step, which forks
it and reads its report, is compile_step.py.
"""
import os

from . import ext_build
from ..common import loader


def set_arch(spec):
    """The job's GPU's architecture for nvcc, where the environment names none (both processes of
    a job build with the same flags, so the candidate's finds the compile step's builds)."""
    if spec.get("cuda_arch"):
        os.environ.setdefault("TORCH_CUDA_ARCH_LIST", str(spec["cuda_arch"]))


def run(ch, spec):
    """The child: imports the candidate so that its load_inline calls build (ext_build.py)."""
    set_arch(spec)
    ch.stage(ext_build.STAGE)
    from .child_common import setup_torch
    torch = setup_torch("cpu", spec.get("threads"))
    builds = []
    ext_build.install(torch, builds)
    note = None
    try:
        loader.load_module("candidate", spec["candidate"])
    except BaseException as e:  # after or between its builds: the candidate's process reports it
        note = "%s: %s" % (type(e).__name__, str(e)[:300])
    ch.send({"type": "compiled_sources", "builds": builds, "top_level_error": note})
