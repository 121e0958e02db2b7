"""The per-GPU timing lease, worker side.

Several workers may share one GPU (the pool's workers_per_gpu). Their untimed stages (load,
compile, correctness trials) run side by side, but a figure must be measured with nothing else
timed or profiled on the GPU. Before each timed or profiled phase of a job the worker asks the
pool for its device's lease and waits:

    worker -> pool   {"id": <job id>, "lease": "acquire"}
    pool -> worker   {"lease": "granted"}
    worker -> pool   {"id": <job id>, "lease": "release"}     (no answer)

The pool grants one worker per device at a time, in the order they asked, and takes the lease
back itself when the job's reply arrives or the worker dies or times out. A worker started
without --lease (the only worker of its device) never asks: no round trip is added.
"""
import contextlib
import json


class Lease:
    def __init__(self, enabled, send, read_line):
        self.enabled = enabled
        self.send = send  # writes one protocol object
        self.read_line = read_line  # the next line from the pool ("" at its end)
        self.job_id = None
        self.held = False

    def begin(self, job_id):
        """A job starts: its requests carry its id."""
        self.job_id = job_id
        self.held = False

    def acquire(self):
        """Waits until this worker holds its device's lease (at once when it holds it already or
        is the device's only worker)."""
        if not self.enabled or self.held:
            return
        self.send({"id": self.job_id, "lease": "acquire"})
        while True:
            line = self.read_line()
            if not line:
                raise SystemExit(0)  # the pool is gone: nothing may be timed any more
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if isinstance(msg, dict) and msg.get("lease") == "granted":
                self.held = True
                return

    def release(self):
        if self.held:
            self.held = False
            self.send({"id": self.job_id, "lease": "release"})

    @contextlib.contextmanager
    def timed(self):
        """Holds the lease for the block (a timed or profiled phase)."""
        self.acquire()
        try:
            yield
        finally:
            self.release()
