"""What a candidate's process does with the GPU memory PyTorch caches for it at a gate
(child_common.gate), without a GPU: against a FAKE torch.cuda whose free memory the test sets.
A process that waits gives its cache back where the GPU is short of memory (the other workers'
processes may need it), keeps it where the GPU has plenty (giving it back and allocating again
are driver calls, the second one under the exclusive lease), never spends its exclusive hold
on it when the hold only turns shared, and frees nothing while it holds no lease (a free beside
another worker's exclusive stage slows that stage)."""
import unittest

from kagent_eval.child import child_common
from kagent_eval.child.child_common import EXCLUSIVE, SHARED

GIB = 1 << 30


class FakeCuda:
    """Stands in for torch.cuda: mem_get_info answers (free, total) as set, or raises."""

    def __init__(self, free, total=100 * GIB, fails=False):
        self.free, self.total, self.fails, self.emptied = free, total, fails, 0

    def mem_get_info(self):
        if self.fails:
            raise RuntimeError("CUDA error: fake")
        return self.free, self.total

    def empty_cache(self):
        self.emptied += 1


class FakeTorch:
    def __init__(self, cuda):
        self.cuda = cuda


def through_gate(free, held, mode, shared_device=True, fails=False):
    """A process holding `held` (None: nothing) goes through a gate for `mode` on a GPU with
    `free` of 100 GiB free: (times it emptied its cache, the modes it waited for, the mode it
    then holds)."""
    cuda, waits = FakeCuda(free, fails=fails), []
    state = {"torch": FakeTorch(cuda), "gate": waits.append, "lease_mode": held,
             "empty_cache_at_gates": shared_device}
    child_common.gate(state, mode)
    return cuda.emptied, waits, state["lease_mode"]


class GateMemory(unittest.TestCase):
    def test_short_memory_is_given_back_before_waiting_for_the_exclusive_lease(self):
        self.assertEqual(through_gate(10 * GIB, SHARED, EXCLUSIVE), (1, [EXCLUSIVE], EXCLUSIVE))

    def test_plenty_of_memory_keeps_the_cache(self):
        self.assertEqual(through_gate(90 * GIB, SHARED, EXCLUSIVE), (0, [EXCLUSIVE], EXCLUSIVE))

    def test_a_process_holding_no_lease_frees_nothing(self):
        # after a Triton compile (compile_gate.py gave back before it) or a spare's first gate
        self.assertEqual(through_gate(10 * GIB, None, SHARED), (0, [SHARED], SHARED))
        self.assertEqual(through_gate(10 * GIB, None, EXCLUSIVE), (0, [EXCLUSIVE], EXCLUSIVE))

    def test_turning_exclusive_into_shared_never_gives_back(self):
        self.assertEqual(through_gate(1 * GIB, EXCLUSIVE, SHARED), (0, [SHARED], SHARED))

    def test_unreadable_free_memory_counts_as_short(self):
        self.assertEqual(through_gate(90 * GIB, SHARED, EXCLUSIVE, fails=True)[0], 1)

    def test_a_gpu_of_its_own_keeps_the_cache(self):
        self.assertEqual(through_gate(1 * GIB, SHARED, EXCLUSIVE, shared_device=False),
                         (0, [EXCLUSIVE], EXCLUSIVE))

    def test_the_threshold_is_a_share_of_the_gpu(self):
        total = 80 * GIB
        edge = int(child_common.GIVE_BACK_BELOW_FREE * total)
        self.assertTrue(child_common.gpu_memory_short(FakeTorch(FakeCuda(edge - 1, total))))
        self.assertFalse(child_common.gpu_memory_short(FakeTorch(FakeCuda(edge + 1, total))))


if __name__ == "__main__":
    unittest.main()
