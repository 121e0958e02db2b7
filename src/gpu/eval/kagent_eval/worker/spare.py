"""A candidate sandbox forked before its job arrives.

Creating the CUDA context, loading Triton's driver and starting CUPTI take a second per process;
a spare child does them while the worker is busy with the previous job, then blocks until the
worker sends the job. No candidate code reaches the process before that, so what it prepared
(the timer's bound primitives, the profiler's state) is as trustworthy as in a child forked on
demand. Stage deadlines start when the job is sent; preparation has its own.

The next spare is forked when a job starts. Its preparation runs nothing on the GPU
(child_candidate.prepare), so it needs no lease and goes on beside any timing
(bench/lease_free_work.py measures that it leaves timings alone).

During the job the child stops at a gate before each part that needs the GPU's lease in another
mode (child_common.gate): it announces the gate as a stage ("gate_shared", or "gate" for
exclusive), the worker gets the lease in that mode and sends "go".
"""
import os
import time

from ..common import wire
from ..sandbox import candidate_cache, jail, sandbox


def _in_spare(wfd, args, job_dir):
    # reads stay open while it prepares (no candidate code yet); _spare_main narrows them. It
    # keeps its end of the job pipe (args[0]) and nothing else of the worker's
    sandbox._child_main(wfd, (args[0],), _spare_main, args, job_dir, "candidate", None)


class Spare:
    def __init__(self, prepare, target, prep_args=(), prep_timeout=120.0):
        self.prep_deadline = time.monotonic() + prep_timeout
        self.info = None
        spec_r, spec_w = os.pipe()
        rfd, wfd = wire.pipe()
        self.job_dir = jail.new_job_dir()
        candidate_cache.lend(self.job_dir)  # its preparation's: the job's comes with the job
        pid = sandbox.fork_child(_in_spare, wfd, (spec_r, prepare, target, prep_args), self.job_dir)
        os.close(wfd)
        os.close(spec_r)
        self.pid, self.rfd, self.spec_w = pid, rfd, spec_w
        self.ready = False

    def wait_ready(self):
        """True once the child has prepared; False (and the child gone) if it failed or hung."""
        if self.ready:
            return True
        if self.pid is None:
            return False
        try:
            obj, _ = wire.recv(self.rfd, self.prep_deadline)
            if isinstance(obj, dict) and obj.get("type") == "ready":
                self.ready, self.info = True, obj
                return True
        except wire.WireError:
            pass
        self.discard()
        return False

    def run(self, spec, timeouts, on_stage=None, defer_exit=False, on_message=None):
        """Outcome of the job in the prepared child, or None when the child is not usable (the
        caller then forks a fresh one). The child stops at each gate (stages "gate_shared" and
        "gate") until open_gate() is called (typically from on_stage). defer_exit, on_message:
        see sandbox.collect."""
        if not self.wait_ready():
            return None
        try:  # its files, where its mount namespace covers them, copied into its folder
            candidate_cache.swap(self.job_dir, spec)
            wire.send(self.spec_w, {"spec": jail.staged(spec, self.job_dir)})
        except OSError:
            self.discard()
            return None
        pid, rfd, gate_w = self.pid, self.rfd, self.spec_w
        self.pid = self.rfd = None
        out = None
        try:
            out = sandbox.collect(pid, rfd, timeouts, on_stage, job_dir=self.job_dir,
                                  defer_exit=defer_exit, on_message=on_message)
        finally:
            os.close(gate_w)
            self.spec_w = None
            if out is not None and getattr(out, "pending_exit", None):
                # its folder and cgroups go once it has exited (sandbox.finish_exit): a group
                # with a process in it cannot be removed
                out.job_dir_after_exit = self.job_dir
            else:
                jail.remove_job_dir(self.job_dir)
        out.prepared = self.info
        return out

    def open_gate(self):
        """Lets the running job go on past the gate it stopped at."""
        try:
            wire.send(self.spec_w, {"go": True})
        except (OSError, TypeError):
            pass  # the child is gone; collect reports how

    def discard(self):
        if self.pid is None:
            return
        for fd in (self.rfd, self.spec_w):
            try:
                os.close(fd)
            except (OSError, TypeError):
                pass
        sandbox._reap(self.pid, kill=True)
        jail.remove_job_dir(self.job_dir)
        self.pid = self.rfd = self.spec_w = None


def _spare_main(ch, spec_fd, prepare, target, prep_args):
    t0 = time.monotonic()
    state = prepare(*prep_args)
    warmed = state.get("warmed") if isinstance(state, dict) else None
    ch.send({"type": "ready", "prepare_s": time.monotonic() - t0, "warmed": warmed})
    obj, _ = wire.recv(spec_fd)
    jail.narrow_reads(jail.job_files(obj["spec"]))
    if isinstance(state, dict):
        state["gate"] = lambda mode: _wait_gate(ch, spec_fd, mode)
    target(ch, obj["spec"], state)


def _wait_gate(ch, fd, mode):
    ch.stage(sandbox.GATE_STAGES[mode])
    wire.recv(fd)
