"""Job orchestration in the worker: the job's spec (job_spec.py), then its gates in order
(job_gates.py: static checks, reference child, candidate child, verdict), and the candidate's
process (a spare prepared ahead of the job, or a fresh fork) under the device's lease."""
import os
import random
import resource
import time

from ..child import child_candidate
from ..common import gpu_memory
from ..profile import pyprofile
from ..sandbox import sandbox
from . import job_gates, job_spec
from ..judge import verdict_library
from . import spare as spare_mod
from .lease import EXCLUSIVE, SHARED, Lease
from .reference import ReferenceCache
from .stage_lease import follow_stage


def _own_cpu_s():
    """CPU seconds (user and system) of the worker's process so far, all its threads."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Evaluator:
    exiting = None  # this job's candidate process while it exits (wait_exit)

    def __init__(self, device, threads=None, lease=None, share=None):
        self.device = device
        # the GPU's lease (lease.py): none while nothing of the job runs on the GPU, shared
        # around untimed GPU work, exclusive through every timed or profiled phase; a worker
        # alone on its device never asks for it
        self.lease = lease or Lease(False, None, None)
        self.cuda = device.startswith("cuda")
        self.threads = threads
        # secret to the candidate until it is forked: where multi-GB outputs are sampled
        self.sample_seed = random.SystemRandom().randrange(1, 2 ** 31)
        # the seed of property trials and resized problems: new per worker (per device where
        # its workers share their references: device_share.py), reported with every result so
        # a failure can be replayed (job "replay_seed")
        self.replay_seed = random.SystemRandom().randrange(1, 2 ** 31)
        if share is not None:
            seeds = share.seeds()
            self.sample_seed, self.replay_seed = seeds["sample_seed"], seeds["replay_seed"]
        self.refs = ReferenceCache(self.lease, self.cuda, share)
        # a candidate sandbox prepared ahead of the next job (KAGENT_EVAL_SPARE=0 turns it off)
        self.use_spare = os.environ.get("KAGENT_EVAL_SPARE", "1") != "0"
        self.spare = None
        self._refill_spare()

    def _refill_spare(self, profile=True):
        """A spare for the next job. It prepares the profile only where `profile` (the job that
        starts it profiled; the worker's first spare does). That preparation is 0.5-0.7 s of CPU
        work that also asks the GPU for its counters: on a host of two GPUs the spares preparing
        it slowed the other GPU's jobs (docs/results/2026-11-28-gpu-d.md), and a search profiles
        only the kernels it keeps. A job that profiles makes it for its own set before its exclusive
        stages (candidate_timing.prepare_profile)."""
        if self.use_spare and self.spare is None:
            self.spare = spare_mod.Spare(child_candidate.prepare, child_candidate.run,
                                         (self.device, self.threads, True, profile))

    def close(self):
        if self.spare is not None:
            self.spare.discard()
            self.spare = None
        if self.refs.share is not None:
            self.refs.share.close()

    def run_candidate(self, cspec, defer_exit=False, on_message=None):
        """The candidate's child for a job: the prepared spare when there is one, else a fresh
        fork; the next spare starts preparing meanwhile (it needs no lease). The spare's child
        holds no lease until its first gate; at each gate the worker gets the lease in the mode
        the child asks for (shared for the build and the trials, exclusive for the timed and
        profiled stages, shared again for the late trials, none for its exit). A child that runs
        out of GPU memory fails the job with result.out_of_memory; the pool, which knows whether
        the job shared the GPU, runs it again alone (kagent/gpu/admission.lua). on_message(obj, arrays):
        each frame of the prepared spare's process as it arrives (early_checks.py; a process
        forked on demand or run again is not followed)."""
        current, self.spare = self.spare, None
        self._refill_spare(profile=cspec.get("profile") is not None)

        def on_stage(name):
            if follow_stage(self.lease, name):
                current.open_gate()  # its deadline starts now

        cspec = dict(cspec, shared_device=self.lease.enabled)
        try:
            out = current.run(cspec, cspec["timeouts"], on_stage, defer_exit, on_message) \
                if current is not None else None
            if out is None:
                # a child forked on demand has no gate to stop at: it holds the lease
                # exclusive throughout when it has anything to time
                timed = child_candidate.times_anything(cspec)
                with self.lease.held(EXCLUSIVE if timed else SHARED):
                    out = self._fork_candidate(cspec)
        finally:
            self.lease.release()
        return out

    def _fork_candidate(self, cspec):
        return sandbox.run_child(child_candidate.run, (cspec,), cspec["timeouts"])

    # -- one job ------------------------------------------------------------------------
    def run(self, op, job):
        t0, cpu0 = time.monotonic(), _own_cpu_s()
        spec = job_spec.normalize(self, op, job)
        result = {"ok": False, "stage": "load", "checks": {}, "flags": [],
                  "audit": {"applicable": self.cuda, "static_findings": []},
                  "device": self.device, "dtype": spec["dtype"],
                  "started_at": t0}  # on stage_at's clock: what comes before the first stage shows
        # what carried its GPU time, until the kernel audit says (verdict_library.py)
        verdict_library.unknown_share(result, "no kernel audit ran (op verify, audit = false, or "
                                      "the job ended before it)" if self.cuda else
                                      "CPU mode: no GPU kernels are profiled")
        result["library"] = spec["library"]
        checked = job_gates.Checked(self, spec, result, pyprofile=pyprofile.new())
        try:
            # the first gate that fails the job ends it
            if all(job_gates.timed(gate, checked) is None for gate in job_gates.GATES):
                result.update(ok=True, stage="done")
        finally:
            # the candidate's process exits while its results are checked; it is gone before
            # the reply (and before anything else of this worker runs)
            if "stage_at" in result:
                result["worker_s"]["verdict"] = time.monotonic() - result["stage_at"]["verdict"]
            self.wait_exit(result)
            if not result.get("ok"):
                # its sizes, for the pool to tell a job that ran out beside others (run again
                # alone) from one that ran out alone (EMEMORY: kagent/gpu/admission.lua)
                oom = gpu_memory.out_of_memory(result.get("error"))
                if oom is not None:
                    result["out_of_memory"] = oom
            result["elapsed"] = time.monotonic() - t0
            result["cpu_s"] = {"worker": round(_own_cpu_s() - cpu0, 4)}
            out = getattr(checked, "out", None)
            if getattr(out, "cpu_s", None) is not None:
                result["cpu_s"]["candidate"] = out.cpu_s
            if checked.pyprofile is not None:
                result.setdefault("pyprofile", {})["worker_checks"] = pyprofile.text(checked.pyprofile)
            if checked.early is not None:
                checked.early.close()
        return result

    def wait_exit(self, result=None):
        """The candidate's process of this job is gone once this returns (it was left to exit
        while its results were checked): before the reply and before any other GPU work of the
        job (a re-measure, the sanitizer)."""
        out, self.exiting = self.exiting, None
        if out is None:
            return
        t = time.monotonic()
        sandbox.finish_exit(out)
        if result is not None and "stage_s" in result:
            result["worker_s"]["exit_wait"] = time.monotonic() - t
            if out.exit_s is not None:
                result["stage_s"]["exit"] = out.exit_s
