"""Untrusted child: loads the candidate, runs the verification trials, audits and times it
(candidate_timing.py).

Everything it sends may be forged by candidate code running here; the worker compares outputs
against the reference child's and sanity-checks timings with its own clock.
"""
import os
import sys
import threading
from dataclasses import dataclass
from typing import Any

from . import candidate_timing, child_common, child_compile, child_reference, ext_build
from ..common import digest, extra_trials, fingerprint, gpu_memory, loader
from ..profile import pyprofile
from ..common.timing import _perf_counter, fake_noisy_clock


def prepare(device, threads, warm=True, profile=True):
    """Everything a candidate's process needs before the candidate: torch on the device, the
    timer (its primitives bound before candidate code runs, its all-stream trace ready) and, on
    a GPU, Triton's driver and, with `profile`, the profiler started, so a spare sandbox pays for
    them before the job arrives. Nothing here runs on the GPU, since a spare prepares without its
    GPU's lease: the timer's calibration (a few milliseconds of L2 flushes and spins) waits for
    the job's first shared hold (_load), and what else runs there is kept in
    state["device_warm"] for warmup.on_device."""
    t0 = _perf_counter()
    one_compile_thread()
    torch = child_common.setup_torch(device, threads)
    timer = child_common.timer(torch, device, calibrate=False)
    state = {"torch": torch, "device": device, "threads": threads, "timer": timer,
             "warmed": {"context_timer": _perf_counter() - t0}}
    if warm and device.startswith("cuda"):
        from . import warmup
        warmed, state["device_warm"] = warmup.host(torch, profile=profile)
        state["warmed"].update(warmed)
    return state


def one_compile_thread():
    """TorchInductor compiles in the thread that asks, in a candidate's process: with more than
    one compile thread it starts a pool of compile workers, whose threads are counted as the
    candidate's (threads_started sets off a hardened re-measure of every file Inductor emitted:
    20-44 s each on a GPU host), and whose compiles in other processes the compile gate
    (compile_gate.py) does not see. The environment for a config not yet read, the config for one
    that was."""
    os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
    config = sys.modules.get("torch._inductor.config")
    if config is not None:
        config.compile_threads = 1


def times_anything(spec):
    """Whether a child for this spec times or profiles anything: it then stops at the gate
    before doing so (the worker holds the device's timing lease from there)."""
    return bool(spec.get("op") == "compare" or spec.get("hardened") or spec.get("audit")
                or spec.get("bench") is not None or spec.get("profile") is not None)


@dataclass
class Job:
    """A candidate's process once its job is loaded: what each of its phases works with."""
    ch: Any          # the channel to the worker
    spec: dict       # the job, as the worker normalized it
    state: dict      # prepare()'s, with the lease's gates
    problem: Any     # the problem's module
    module: Any      # the candidate's module
    cand: Any        # the candidate, built: called on a trial's inputs
    dtype: Any
    threads_before: int  # threads alive before the candidate's code ran

    @property
    def torch(self):
        return self.state["torch"]

    @property
    def timer(self):
        return self.state["timer"]

    @property
    def device(self):
        return self.spec["device"]

    @property
    def cuda(self):
        return self.device.startswith("cuda")


def run(ch, spec, state=None):
    if pyprofile.enabled():  # a harness benchmark asks where the job's time goes
        return pyprofile.run_profiled(lambda t: ch.send({"type": "pyprofile", "text": t}),
                                      _run, ch, spec, state)
    return _run(ch, spec, state)


def _run(ch, spec, state):
    device = spec["device"]
    ch.stage("load")
    gpu_memory.set_budget(spec.get("memory_budget_bytes"))
    fake_noisy_clock(spec.get("fake_noisy_clock"))  # TEST ONLY (noise.FAKE_CLOCK_ENV)
    if state is None or state["device"] != device or state["threads"] != spec.get("threads"):
        state = prepare(device, spec.get("threads"), warm=False)
        if getattr(ch, "gate_fd", None) is not None:  # forked with a gate (remeasure.py)
            state["gate"] = ch.gate
    if spec.get("op") == "compare":
        from . import interleave
        interleave.run(ch, spec, state)
        return
    job = _load(ch, spec, state)
    if spec.get("hardened"):
        # a re-measure of a verified candidate: no trials, only the hardened timing
        child_common.gate(state, "exclusive")
        ch.stage("benchmark")
        candidate_timing.hardened(job)
        return

    plan = [e for e in child_reference.trial_plan(spec, job.problem)
            if e["trial"] not in set(spec.get("skip_trials") or ())]
    _trials(job, [e for e in plan if not e["late"]])
    ch.send({"type": "threads", "before": job.threads_before, "after": threading.active_count()})
    compiled = fingerprint.of_module(job.module)
    if compiled:
        ch.send({"type": "compiled", "fingerprint": compiled})

    if times_anything(spec):
        candidate_timing.timed(job, plan)
    late = [e for e in plan if e["late"]]
    if late:
        _trials(job, late, tolerant=True)
    _gpu_done(job)


def _load(ch, spec, state):
    """The problem and the candidate, built on the device under the lease shared."""
    torch, device = state["torch"], spec["device"]
    cuda = device.startswith("cuda")
    dtype = loader.torch_dtype(torch, spec["dtype"])
    problem = loader.load_module("problem", spec["problem"])
    state["empty_cache_at_gates"] = cuda and bool(spec.get("shared_device"))
    child_common.gate(state, "shared")  # from here on this process runs work on the GPU
    if cuda:  # Triton's compiles give the shared hold up meanwhile
        from . import compile_gate
        compile_gate.install(ch, state, torch.cuda.synchronize)
    ch.stage("build")
    # where the build stage's seconds go (the result's build_parts): a program TorchInductor
    # emitted spends most of them importing and loading, not compiling (no compile_host stage)
    parts, t = {}, _perf_counter()
    if state.get("device_warm") is not None:
        from . import warmup
        ch.send({"type": "warmed", "parts": warmup.on_device(torch, state.pop("device_warm"))})
        parts["device_warm"], t = _perf_counter() - t, _perf_counter()
    if cuda:  # its kernels wait for the lease too (prepare), and run before the candidate's code
        state["timer"].calibrate()
        parts["timer_calibration"], t = _perf_counter() - t, _perf_counter()
    init_inputs = list(problem.get_init_inputs())
    ref_model = loader.build_model(torch, problem.Model, init_inputs, spec["seed"], dtype, device)
    parts["reference_model"], t = _perf_counter() - t, _perf_counter()
    threads_before = threading.active_count()
    inductor_before = "torch._inductor" in sys.modules
    if ext_build.uses_load_inline(loader.source_of(spec["candidate"])[0]):
        # its builds were made before the lease by the compile step (child_compile.py): found
        # in the job's extension cache; one that was not compiles here, in stage compile_source
        child_compile.set_arch(spec)
        ext_build.install(torch, [], lambda stage: _announce(ch, stage))
    module = loader.load_module("candidate", spec["candidate"])
    parts["import"], t = _perf_counter() - t, _perf_counter()
    if spec.get("in_model"):  # the model with the kernel in place of its targets
        from ..common import in_model
        cand = in_model.build(torch, spec, module, ref_model, dtype, device)
    else:
        cand = loader.build_candidate(torch, module, ref_model, init_inputs, spec["seed"], dtype, device)
    parts["candidate"] = _perf_counter() - t
    ch.send({"type": "loaded", "kind": "ModelNew" if hasattr(module, "ModelNew") else "kernel_function",
             "build_parts": parts,
             "imported_inductor": not inductor_before and "torch._inductor" in sys.modules})
    return Job(ch, spec, state, problem, module, cand, dtype, threads_before)


def _announce(ch, stage):
    """Announces `stage`; returns the stage it interrupts (ext_build.install's announce)."""
    resume = ch.last_stage
    ch.stage(stage)
    return resume


# the stage a candidate's process announces once its GPU work is over: the worker gives back a
# shared hold of the lease (stage_lease.follow_stage), and the process's exit (the CUDA context
# torn down, no kernel) runs without it
GPU_DONE = "gpu_done"


def _gpu_done(job):
    if job.cuda:
        job.torch.cuda.synchronize()
        # what this process held at its peak (result.memory.candidate_peak_bytes): the figure
        # the pool's footprint multiple must cover (kagent/gpu/admission.lua)
        job.ch.send({"type": "memory", "peak_bytes": gpu_memory.peak_bytes(job.torch, job.device)})
        job.ch.stage(GPU_DONE)


def _trials(job, plan, tolerant=False):
    """Runs the given trials and sends what came out. One input set and one output are alive
    at a time, beside the previous output (kept so that a reused buffer shows as overlap).
    tolerant: a trial that raises is reported as that trial's error instead of ending the job."""
    ch, torch, spec = job.ch, job.torch, job.spec
    sync = job.timer._sync
    prev_keep, prev_spans = None, []
    for entry in plan:
        t = entry["trial"]
        ch.stage("compile" if t == 0 else "run")
        try:
            args, dist = extra_trials.trial_inputs(torch, job.problem, entry, job.dtype,
                                                   job.device, spec.get("input_contract"))
            if job.cuda:
                _poison(torch, job.device, spec.get("poison_bytes", 0), t)
            in_spans = [child_common.storage_span(torch, a) for a in args
                        if isinstance(a, torch.Tensor)]
            # the inputs and the poison are made on the current stream, asynchronously: the call
            # starts once they are done, so work it puts on another stream never races them
            # (an unjoined side stream is the timing's to catch, not a trial's luck)
            sync()
            t0 = _perf_counter()
            with torch.no_grad():
                out = job.cand(*args)
            sync()
        except Exception as e:
            if not tolerant:
                raise
            ch.send({"type": "trial", "trial": t, "error": "%s: %s" % (type(e).__name__,
                                                                      str(e)[:500])})
            args = out = None
            continue
        call_ms = (_perf_counter() - t0) * 1e3
        outs = digest.flatten_outputs(torch, out)
        spans = [child_common.storage_span(torch, o) for o in outs if isinstance(o, torch.Tensor)]
        alias_input = any(child_common.overlaps(s, i) for s in spans for i in in_spans)
        alias_prev = any(child_common.overlaps(s, p) for s in spans for p in prev_spans)
        out_metas, out_arrays = digest.digest_list(torch, outs, spec["sample_seed"])
        ch.send({"type": "trial", "trial": t, "dist": dist, "outputs": out_metas,
                 "inputs_after": digest.input_digests(torch, args, spec["sample_seed"]),
                 "alias_input": alias_input, "alias_prev": alias_prev,
                 "call_ms": call_ms}, out_arrays)
        del args, out, prev_keep
        prev_keep, prev_spans = outs, spans
    del prev_keep


def _poison(torch, device, nbytes, trial):
    """Leave NaN (or a large value) in the allocator's free blocks, so a kernel that reads
    memory it never wrote shows garbage instead of a lucky right answer."""
    if nbytes <= 0:
        return
    n = max(1, min(nbytes, 4 << 30) // 4)
    buf = torch.empty(n, dtype=torch.float32, device=device)
    buf.fill_(float("nan") if trial % 2 == 0 else 1e4)
    del buf
