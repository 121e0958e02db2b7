"""GPU memory in the worker, without a GPU: the sizes read from a CUDA out-of-memory error (the
pool's EMEMORY names them), the budget that keeps a job's adaptive buffers inside what the pool
admitted it with (a FAKE torch.cuda reports the device's memory), and a candidate that ran out
of memory is no longer run again by the worker: the pool, which knows whether the job shared the
GPU, runs it again alone (kagent/gpu/admission.lua; a FAKE spare returns the outcome)."""
import os
import unittest
from unittest import mock

from kagent_eval.common import gpu_memory, timed_inputs
from kagent_eval.judge import verdict
from kagent_eval.sandbox import sandbox
from kagent_eval.worker import job_gates, jobs
from kagent_eval.worker.lease import Lease

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

GIB = 1 << 30
NEW = ("CUDA out of memory. Tried to allocate 8.00 GiB. GPU 0 has a total capacity of 79.19 GiB "
       "of which 5.36 GiB is free. Including non-PyTorch memory, this process has 73.82 GiB memory "
       "in use.")
OLD = ("CUDA out of memory. Tried to allocate 512.00 MiB (GPU 0; 39.59 GiB total capacity; 37.10 GiB "
       "already allocated; 120.50 MiB free; 38.00 GiB reserved in total by PyTorch)")


def outcome(error_type=None, message=""):
    out = sandbox.Outcome()
    if error_type:
        out.messages.append(({"type": "error", "error_type": error_type, "message": message}, []))
    else:
        out.messages.append(({"type": "done"}, []))
    return out


class FakeCuda:
    """A FAKE torch.cuda: free and total memory of the device, and what this process's tensors
    hold (allocated) and its allocator keeps (reserved: allocated and cached)."""

    def __init__(self, free, total, allocated, reserved):
        self.free, self.total = free, total
        self.allocated, self.reserved = allocated, max(reserved, allocated)

    def mem_get_info(self):
        return self.free, self.total

    def memory_allocated(self):
        return self.allocated

    def memory_reserved(self):
        return self.reserved


class FakeTorch:
    def __init__(self, free, total=80 * GIB, allocated=0, reserved=0):
        self.cuda = FakeCuda(free, total, allocated, reserved)


class FakeSpare:
    def __init__(self, out):
        self.out = out

    def run(self, spec, timeouts, on_stage=None, defer_exit=False, on_message=None):
        return self.out


class OutOfMemorySizes(unittest.TestCase):
    def test_reads_the_sizes_of_both_message_forms(self):
        self.assertEqual(gpu_memory.out_of_memory("ERUN: OutOfMemoryError: " + NEW), {
            "tried_bytes": 8 * GIB, "free_bytes": int(5.36 * GIB), "total_bytes": int(79.19 * GIB)})
        self.assertEqual(gpu_memory.out_of_memory("EREFERENCE: RuntimeError: " + OLD), {
            "tried_bytes": 512 << 20, "free_bytes": int(120.5 * (1 << 20)),
            "total_bytes": int(39.59 * GIB)})

    def test_other_errors_are_not_out_of_memory(self):
        for text in ("ERUN: RuntimeError: CUDA error: an illegal memory access", "EMISMATCH: x",
                     "EMEMORY: the job ran out of its memory limit of 4096 MB", None):
            self.assertIsNone(gpu_memory.out_of_memory(text))
        self.assertEqual(gpu_memory.out_of_memory("OutOfMemoryError: CUDA out of memory."),
                         {"tried_bytes": None, "free_bytes": None, "total_bytes": None})


class Budget(unittest.TestCase):
    def tearDown(self):
        gpu_memory.set_budget(None)

    def test_without_a_budget_the_gpu_free_memory_counts(self):
        gpu_memory.set_budget(None)
        self.assertEqual(gpu_memory.free_bytes(FakeTorch(60 * GIB, allocated=10 * GIB)), 60 * GIB)

    def test_a_budget_bounds_what_the_process_may_still_take(self):
        gpu_memory.set_budget(32 * GIB)
        self.assertEqual(gpu_memory.free_bytes(FakeTorch(60 * GIB, allocated=10 * GIB)), 22 * GIB)
        self.assertEqual(gpu_memory.free_bytes(FakeTorch(5 * GIB, allocated=10 * GIB)), 5 * GIB)
        self.assertEqual(gpu_memory.free_bytes(FakeTorch(60 * GIB, allocated=40 * GIB)), 0)
        # the allocator's cache is this process's to reuse: it counts as free, within the budget
        self.assertEqual(gpu_memory.free_bytes(FakeTorch(5 * GIB, allocated=10 * GIB,
                                                         reserved=18 * GIB)), 13 * GIB)

    def test_the_timed_input_sets_stay_inside_the_budget(self):
        # three 8 GiB sets take 24 GiB: 40% of 70 GiB free, but not of a 32 GiB budget
        torch = FakeTorch(70 * GIB)
        self.assertTrue(timed_inputs.fits(torch, "cuda:0", 8 * GIB, 3))
        gpu_memory.set_budget(32 * GIB)
        self.assertFalse(timed_inputs.fits(torch, "cuda:0", 8 * GIB, 3))
        self.assertTrue(timed_inputs.fits(torch, "cuda:0", 8 * GIB, 1))


class NoRetryInTheWorker(unittest.TestCase):
    def test_the_outcome_knows_a_cuda_allocation_failure(self):
        self.assertTrue(outcome("OutOfMemoryError", NEW).out_of_gpu_memory())
        self.assertTrue(outcome("RuntimeError", "CUDA out of memory.").out_of_gpu_memory())
        self.assertFalse(outcome("MemoryError", "cannot allocate memory").out_of_gpu_memory())
        self.assertFalse(outcome().out_of_gpu_memory())

    def test_out_of_memory_beside_other_workers_is_returned_as_it_is(self):
        ev = object.__new__(jobs.Evaluator)
        ev.cuda, ev.use_spare = True, False
        ev.lease = Lease(True, lambda msg: None, lambda: '{"lease": "granted"}')
        first = outcome("OutOfMemoryError", NEW)
        ev.spare = FakeSpare(first)
        forks = []
        ev._fork_candidate = lambda cspec: forks.append(cspec) or outcome()
        out = ev.run_candidate({"timeouts": {}, "op": "verify", "bench": None, "profile": None,
                                "audit": False})
        self.assertIs(out, first)
        self.assertEqual(forks, [], "the pool runs it again alone, not the worker")


class TheResultCarriesTheSizes(unittest.TestCase):
    """Evaluator.run marks a failed job's out-of-memory error (result.out_of_memory) for the pool,
    whichever gate failed; a FAKE gate stands for the reference or the candidate."""

    def run_job(self, fake_gate):
        ev = object.__new__(jobs.Evaluator)
        ev.device, ev.cuda, ev.threads, ev.sample_seed, ev.replay_seed = "cpu", False, None, 1, 2
        problem = os.path.join(ROOT, "examples", "problems", "rmsnorm_small.py")
        with mock.patch.object(job_gates, "GATES", (fake_gate,)):
            return ev.run("verify", {"problem": problem, "candidate": problem})

    def test_an_out_of_memory_failure_has_its_sizes(self):
        r = self.run_job(lambda c: verdict.fail(c.result, "load", "EREFERENCE",
                                                "the reference failed in stage run: " + NEW))
        self.assertFalse(r["ok"])
        self.assertEqual(r["out_of_memory"]["tried_bytes"], 8 * GIB)

    def test_other_failures_and_passes_have_none(self):
        r = self.run_job(lambda c: verdict.fail(c.result, "correctness", "EMISMATCH", "trial 0"))
        self.assertNotIn("out_of_memory", r)
        self.assertNotIn("out_of_memory", self.run_job(lambda c: None))


if __name__ == "__main__":
    unittest.main()
