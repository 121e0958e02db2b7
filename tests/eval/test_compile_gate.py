"""Triton compiles with no GPU lease held (compile_gate.py), both sides, without a GPU: the
child's wrapper of Triton's compile, against a FAKE triton module that stands in for the real one
(tests/gpu/lease_gpu_check.lua runs the real one on a GPU), and the worker's answer to the stages
it announces (stage_lease.follow_stage), against a Lease that records what it would send the
pool."""
import sys
import types
import unittest

from kagent_eval.child import child_common, compile_gate
from kagent_eval.worker import stage_lease
from kagent_eval.worker.lease import EXCLUSIVE, SHARED, Lease


class FakeJITFunction:
    """Stands in for triton.runtime.jit.JITFunction: _do_compile is what Triton calls on a miss
    of its in-memory kernel cache."""

    def __init__(self, log, fail=False):
        self.log, self.fail = log, fail

    def _do_compile(self, key):
        self.log.append(("compile", key))
        if self.fail:
            raise RuntimeError("CompilationError: fake")
        return "kernel:" + key


class FakeChannel:
    def __init__(self, log):
        self.log, self.last_stage = log, None

    def stage(self, name):
        self.log.append(("stage", name))
        self.last_stage = name


def install_fake_triton():
    names = ("triton", "triton.runtime", "triton.runtime.jit")
    saved = {n: sys.modules.get(n) for n in names}
    jit = types.ModuleType("triton.runtime.jit")
    jit.JITFunction = type("JITFunction", (FakeJITFunction,), {
        "_do_compile": FakeJITFunction._do_compile})
    runtime = types.ModuleType("triton.runtime")
    runtime.jit = jit
    triton = types.ModuleType("triton")
    triton.runtime = runtime
    sys.modules.update({"triton": triton, "triton.runtime": runtime, "triton.runtime.jit": jit})

    def restore():
        for n, m in saved.items():
            if m is None:
                sys.modules.pop(n, None)
            else:
                sys.modules[n] = m
    return jit.JITFunction, restore


class ChildWrapper(unittest.TestCase):
    def setUp(self):
        self.JIT, restore = install_fake_triton()
        self.addCleanup(restore)
        self.log = []
        self.ch = FakeChannel(self.log)
        # a spare's gate: announces its stage, as spare._wait_gate does, and is opened at once
        self.state = {"gate": lambda mode: self.log.append(("gate", mode))}
        self.remove = compile_gate.install(self.ch, self.state, lambda: self.log.append(("sync",)))
        self.addCleanup(lambda: self.remove and self.remove())

    def shared_trial(self):
        child_common.gate(self.state, SHARED)
        self.ch.stage("compile")
        del self.log[:]

    def test_a_compile_under_shared_gives_the_lease_up_and_takes_it_back_before_launching(self):
        self.shared_trial()
        kernel = self.JIT(self.log)._do_compile("k1")
        self.assertEqual(kernel, "kernel:k1")
        self.assertEqual(self.log, [("sync",), ("stage", "compile_host"), ("compile", "k1"),
                                    ("gate", SHARED), ("stage", "compile")])
        self.assertEqual(self.state["lease_mode"], SHARED)

    def test_short_memory_is_given_back_before_the_shared_hold_is(self):
        # where the GPU is short of memory, the cache goes back while the hold is still held: a
        # free beside another worker's exclusive stage slows it (child_common.give_back_memory)
        log = self.log

        class FakeCuda:
            def mem_get_info(self):
                return 1 << 30, 100 << 30

            def empty_cache(self):
                log.append(("empty_cache",))
        self.state.update(torch=types.SimpleNamespace(cuda=FakeCuda()), empty_cache_at_gates=True)
        self.shared_trial()
        self.JIT(self.log)._do_compile("k1")
        self.assertEqual(self.log, [("sync",), ("empty_cache",), ("stage", "compile_host"),
                                    ("compile", "k1"), ("gate", SHARED), ("stage", "compile")])

    def test_a_failed_compile_still_waits_for_the_lease_before_going_on(self):
        self.shared_trial()
        with self.assertRaises(RuntimeError):
            self.JIT(self.log, fail=True)._do_compile("bad")
        self.assertEqual(self.log[-2:], [("gate", SHARED), ("stage", "compile")])
        self.assertEqual(self.state["lease_mode"], SHARED)

    def test_under_exclusive_or_before_any_gate_nothing_changes(self):
        self.JIT(self.log)._do_compile("early")  # a spare preparing: no lease, no gate yet
        child_common.gate(self.state, EXCLUSIVE)
        self.JIT(self.log)._do_compile("timed")
        self.assertEqual(self.log, [("compile", "early"), ("gate", EXCLUSIVE), ("compile", "timed")])

    def test_remove_restores_tritons_compile(self):
        self.remove()
        self.remove = None
        self.shared_trial()
        self.JIT(self.log)._do_compile("k2")
        self.assertEqual(self.log, [("compile", "k2")])

    def test_no_gate_no_wrapper(self):
        self.assertIsNone(compile_gate.install(self.ch, {}, lambda: None))


class WorkerSide(unittest.TestCase):
    def lease(self):
        sent = []
        grants = iter(['{"lease": "granted"}'] * 4)
        return Lease(True, sent.append, lambda: next(grants, "")), sent

    def test_compile_host_gives_a_shared_hold_back(self):
        lease, sent = self.lease()
        lease.begin(7)
        self.assertTrue(stage_lease.follow_stage(lease, "gate_shared"))
        self.assertFalse(stage_lease.follow_stage(lease, compile_gate.STAGE))
        self.assertIsNone(lease.mode)
        self.assertTrue(stage_lease.follow_stage(lease, "gate_shared"))
        self.assertEqual([(m["lease"], m.get("mode")) for m in sent],
                         [("acquire", SHARED), ("release", None), ("acquire", SHARED)])

    def test_gpu_done_gives_a_shared_hold_back_for_the_exit(self):
        lease, sent = self.lease()
        lease.begin(10)
        stage_lease.follow_stage(lease, "gate_shared")
        self.assertFalse(stage_lease.follow_stage(lease, "gpu_done"))
        self.assertIsNone(lease.mode)
        self.assertEqual([m["lease"] for m in sent], ["acquire", "release"])

    def test_compile_host_never_gives_an_exclusive_hold_back(self):
        lease, sent = self.lease()
        lease.begin(8)
        self.assertTrue(stage_lease.follow_stage(lease, "gate"))
        self.assertFalse(stage_lease.follow_stage(lease, compile_gate.STAGE))
        self.assertFalse(stage_lease.follow_stage(lease, "gpu_done"))
        self.assertEqual(lease.mode, EXCLUSIVE)
        self.assertEqual([m["lease"] for m in sent], ["acquire"])

    def test_other_stages_leave_the_lease_alone(self):
        lease, sent = self.lease()
        lease.begin(9)
        stage_lease.follow_stage(lease, "gate_shared")
        for name in ("build", "compile", "run", "benchmark"):
            self.assertFalse(stage_lease.follow_stage(lease, name))
        self.assertEqual(lease.mode, SHARED)
        self.assertEqual(len(sent), 1)


if __name__ == "__main__":
    unittest.main()
