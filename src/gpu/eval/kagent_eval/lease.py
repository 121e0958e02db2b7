"""The per-GPU lease, worker side.

Several workers may share one GPU (the pool's workers_per_gpu). A figure must be measured with
nothing else running on the GPU, so the worker asks the pool for its device's lease around all
the GPU work of a job, in one of two modes:

  shared     untimed GPU work: the candidate's process building its models and running its
             correctness trials (before its timed stages) and its late trials (after them),
             the reference's outputs, an analysis. Any number of workers at once.
  exclusive  timed or profiled work: the candidate's timed and profiled stages, the baselines,
             the hardened re-measure, sanitize, peaks. Nobody else holds the lease meanwhile.
             A candidate's warm-up before its timed loop, and the analysis of the loop's trace
             and the digests of its outputs after it, run shared (child_candidate.py).

What runs nothing on the GPU holds no lease: a spare sandbox preparing (a CUDA context, the
timer's buffers, CUPTI and Triton set up, no kernel), the problem's module loading, a Triton
compile (compile_gate.py), a candidate's process exiting after its GPU work (stage gpu_done), the
worker's checks.

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
"""
import contextlib
import json

SHARED, EXCLUSIVE = "shared", "exclusive"


class Lease:
    def __init__(self, enabled, send, read_line):
        self.enabled = enabled
        self.send = send  # writes one protocol object
        self.read_line = read_line  # the next line from the pool ("" at its end)
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
