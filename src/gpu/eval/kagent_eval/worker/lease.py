"""The per-GPU lease, worker side.

Several workers may share one GPU (the pool's workers_per_gpu). A figure must be measured with
nothing else running on the GPU, so the worker asks the pool for its device's lease around all
the GPU work of a job, in one of two modes:

  shared     untimed GPU work: the candidate's process building its models and running its
             correctness trials (before its timed stages) and its late trials (after them),
             the reference's outputs, an analysis. Any number of workers at once.
  exclusive  timed or profiled work: the candidate's timed and profiled stages, the baselines,
             the hardened re-measure's timing, sanitize, peaks. Nobody else holds the lease
             meanwhile.
             A candidate's warm-up before its timed loop, and the analysis of the loop's trace
             and the digests of its outputs after it, run shared (child_candidate.py).

What runs nothing on the GPU holds no lease: a spare sandbox preparing (a CUDA context, the
timer's buffers, CUPTI and Triton set up, no kernel), the problem's module loading, a Triton
compile (compile_gate.py), TorchInductor's compile of a whole model (unleased_compile.py), a
candidate's process exiting after its GPU work (stage gpu_done), the worker's checks.

    worker -> pool   {"id": <job id>, "lease": "acquire", "mode": "shared"|"exclusive"}
    pool -> worker   {"lease": "granted", "mode": ...}
    worker -> pool   {"id": <job id>, "lease": "release"}     (no answer)

A worker holds one mode at a time: to change it, it stops its GPU work first (the candidate's
process waits at a gate, child_common.gate), releases, and asks again; from exclusive to shared
it asks without releasing, and the pool turns its hold into a shared one at once. The pool
serves requests in order (a shared request waits behind an earlier exclusive one) and takes back
what a worker holds when the job's reply arrives or the worker dies or times out. Only this
trusted worker speaks to the pool: a candidate's process cannot ask, and its hold ends when the
worker ends its stage (a stage's deadline kills the process, then the worker releases). A worker
started without --lease (the only worker of its device) never asks: no round trip is added.

Pools do not know each other: two runs on one GPU (a sweep with more runs than GPUs, two of the
user's sessions) each have their own. So every GPU worker also holds its GPU's host lease
(HostLock) in the same mode while it holds its pool's: an advisory lock (flock, shared or
exclusive) on a file per GPU in the user's private sandbox folder, which no child can reach and
whose descriptor no child keeps. A worker never waits for it while holding it, so no two pools
wait on each other in a circle; the kernel drops it with a worker that dies. flock alone grants a
shared request whenever others hold the lock shared, so shared holds that keep overlapping would
keep an exclusive request waiting forever (in a Level 3 sweep of 12 runs, the shared holds on one
GPU left no gap longer than a second in 16 minutes): every request first passes
a second lock, the GPU's turnstile, which an exclusive request keeps while it waits, so shared
requests made after it wait behind it.
"""
import contextlib
import fcntl
import json
import os
import re

SHARED, EXCLUSIVE = "shared", "exclusive"


class HostLock:
    """A GPU's lease among all pools of this user on this host: flock on its file, entered
    through its turnstile (flock exclusive on a second file), which an exclusive request holds
    until it is granted: shared requests made meanwhile wait for it, and the shared holds already
    granted end."""

    def __init__(self, folder, device):
        os.makedirs(folder, 0o700, exist_ok=True)
        name = re.sub(r"[^A-Za-z0-9._-]", "_", str(device)) or "gpu"
        self.path = os.path.join(folder, name + ".lock")
        self.fd = _open_private(self.path)
        self.turnstile = _open_private(os.path.join(folder, name + ".turnstile"))
        self.mode = None

    def hold(self, mode):
        """Waits for the lock in `mode`; a held one changes mode. From exclusive to shared it
        does not pass the turnstile, which an exclusive request waiting for this very hold may
        keep; from shared to exclusive it lets go first, so that it never waits holding it."""
        if self.mode == EXCLUSIVE and mode == SHARED:
            fcntl.flock(self.fd, fcntl.LOCK_SH)
        else:
            if self.mode is not None:
                self.release()
            fcntl.flock(self.turnstile, fcntl.LOCK_EX)
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX if mode == EXCLUSIVE else fcntl.LOCK_SH)
            finally:
                fcntl.flock(self.turnstile, fcntl.LOCK_UN)
        self.mode = mode

    def release(self):
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        self.mode = None


def _open_private(path):
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


class Lease:
    def __init__(self, enabled, send, read_line, host=None):
        self.enabled = enabled
        self.send = send  # writes one protocol object
        self.read_line = read_line  # the next line from the pool ("" at its end)
        self.host = host  # the GPU's HostLock among pools, or None (CPU mode)
        self.job_id = None
        self.mode = None  # what this worker holds: None, SHARED or EXCLUSIVE

    def begin(self, job_id):
        """A job starts: its requests carry its id."""
        self.job_id = job_id
        self.mode = None

    def acquire(self, mode=EXCLUSIVE):
        """Waits until this worker holds its device's lease in `mode` (at once when it holds it
        already or is the device's only worker). A worker holding exclusive that asks for shared
        keeps the lease, shared (the pool grants that at once); one holding shared gives it up
        before it asks for exclusive."""
        if self.mode == mode:
            return
        if not (self.mode == EXCLUSIVE and mode == SHARED):
            self.release()
        if self.enabled:
            self.send({"id": self.job_id, "lease": "acquire", "mode": mode})
            self._wait_grant()
        if self.host is not None:
            self.host.hold(mode)
        self.mode = mode

    def _wait_grant(self):
        while True:
            line = self.read_line()
            if not line:
                raise SystemExit(0)  # the pool is gone: nothing may run on the GPU any more
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if isinstance(msg, dict) and msg.get("lease") == "granted":
                return

    def release(self):
        held, self.mode = self.mode, None
        if held is not None and self.host is not None:
            self.host.release()
        if held is not None and self.enabled:
            self.send({"id": self.job_id, "lease": "release"})

    @contextlib.contextmanager
    def held(self, mode):
        """Holds the lease in `mode` for the block, and nothing after it; inside a block that
        holds it already (or holds exclusive, where shared is asked), changes nothing."""
        if self.mode == mode or (mode == SHARED and self.mode == EXCLUSIVE):
            yield
            return
        self.acquire(mode)
        try:
            yield
        finally:
            self.release()

    def timed(self):
        """A timed or profiled phase: exclusive."""
        return self.held(EXCLUSIVE)

    def shared(self):
        """Untimed GPU work."""
        return self.held(SHARED)
