"""A candidate that runs out of GPU memory beside the other workers' processes is run once more
alone on the GPU (jobs.Evaluator.run_candidate), without a GPU: a FAKE spare returns the first
outcome, and the retry's fresh process is replaced by a recorder of the lease it ran under."""
import unittest

from kagent_eval import jobs, sandbox
from kagent_eval.lease import EXCLUSIVE, Lease


def outcome(error_type=None, message=""):
    out = sandbox.Outcome()
    if error_type:
        out.messages.append(({"type": "error", "error_type": error_type, "message": message}, []))
    else:
        out.messages.append(({"type": "done"}, []))
    return out


class FakeSpare:
    def __init__(self, out):
        self.out = out

    def run(self, spec, timeouts, on_stage=None, defer_exit=False, on_message=None):
        return self.out


def evaluator(first, shared_device=True, cuda=True):
    ev = object.__new__(jobs.Evaluator)
    ev.cuda, ev.use_spare, ev.close_fds = cuda, False, []
    sent = []
    ev.lease = Lease(shared_device, sent.append, lambda: '{"lease": "granted"}')
    ev.spare = FakeSpare(first)
    ev.forks = []

    def fork(cspec):
        ev.forks.append((cspec, ev.lease.mode))
        return outcome()
    ev._fork_candidate = fork
    return ev, sent


SPEC = {"timeouts": {}, "op": "verify", "bench": None, "profile": None, "audit": False}
OOM = ("OutOfMemoryError", "CUDA out of memory. Tried to allocate 8.00 GiB")


class GpuMemoryRetry(unittest.TestCase):
    def test_the_outcome_knows_a_cuda_allocation_failure(self):
        self.assertTrue(outcome(*OOM).out_of_gpu_memory())
        self.assertTrue(outcome("RuntimeError", "CUDA out of memory.").out_of_gpu_memory())
        self.assertFalse(outcome("MemoryError", "cannot allocate memory").out_of_gpu_memory())
        self.assertFalse(outcome().out_of_gpu_memory())

    def test_out_of_memory_beside_other_workers_runs_again_alone(self):
        ev, sent = evaluator(outcome(*OOM))
        out = ev.run_candidate(dict(SPEC))
        self.assertTrue(getattr(out, "retried_alone", False))
        self.assertEqual(len(ev.forks), 1)
        self.assertEqual(ev.forks[0][1], EXCLUSIVE, "the retry held the lease exclusive")
        self.assertEqual(sent[-1]["lease"], "release", "and gave it back after")

    def test_alone_on_its_gpu_or_for_another_error_it_fails_as_it_did(self):
        for ev, _ in (evaluator(outcome(*OOM), shared_device=False),
                      evaluator(outcome("RuntimeError", "illegal memory access")),
                      evaluator(outcome(*OOM), cuda=False)):
            out = ev.run_candidate(dict(SPEC))
            self.assertFalse(getattr(out, "retried_alone", False))
            self.assertEqual(ev.forks, [])


if __name__ == "__main__":
    unittest.main()
