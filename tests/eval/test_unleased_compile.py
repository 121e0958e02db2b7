"""TorchInductor compiles with the GPU's lease given up (unleased_compile.py), without a GPU: the
gate of a child forked on demand (sandbox.run_child, real forks), the worker's answer to the
stages it announces, and the child's backend wrapper against a FAKE torch whose "inductor" backend
records its calls (tests/gpu/levels23_gpu_check.sh runs the real one)."""
import os
import sys
import types
import unittest
from unittest import mock

from worker_client import ROOT

sys.path.insert(0, os.path.join(ROOT, "src", "gpu", "eval"))
from kagent_eval.child import unleased_compile  # noqa: E402
from kagent_eval.sandbox import sandbox  # noqa: E402
from kagent_eval.worker.lease import EXCLUSIVE, SHARED  # noqa: E402


class RecordingLease:
    """Stands in for lease.Lease: records what the worker would ask of the pool and the host."""

    def __init__(self, mode=None):
        self.mode, self.log = mode, []

    def release(self):
        self.log.append(("release", self.mode))
        self.mode = None

    def acquire(self, mode):
        self.log.append(("acquire", mode))
        self.mode = mode


def _compiles_then_times(ch, spec):
    ch.stage("baseline")
    ch.stage(unleased_compile.STAGE)
    gated = ch.gate(spec["mode"])
    ch.stage("baseline")
    ch.send({"type": "after", "gated": gated})


class ChildGate(unittest.TestCase):
    def test_the_lease_is_given_up_for_the_compile_and_taken_again_before_the_child_goes_on(self):
        lease = RecordingLease(EXCLUSIVE)
        out = sandbox.run_child(_compiles_then_times, ({"mode": EXCLUSIVE},), None,
                                gate=unleased_compile.follow(lease))
        self.assertIsNone(out.failure)
        after, _ = out.first("after")
        self.assertEqual(after, dict(after, gated=True))
        self.assertEqual(lease.log, [("release", EXCLUSIVE), ("acquire", EXCLUSIVE)])
        stages = [o["stage"] for o, _ in out.of_type("stage")]
        self.assertEqual(stages, ["baseline", unleased_compile.STAGE, "gate", "baseline"])

    def test_a_shared_child_takes_the_lease_back_shared(self):
        lease = RecordingLease(SHARED)
        out = sandbox.run_child(_compiles_then_times, ({"mode": SHARED},), None,
                                gate=unleased_compile.follow(lease))
        self.assertIsNone(out.failure)
        self.assertEqual(lease.log, [("release", SHARED), ("acquire", SHARED)])

    def test_a_child_without_a_gate_goes_on_at_once(self):
        out = sandbox.run_child(_compiles_then_times, ({"mode": EXCLUSIVE},))
        self.assertIsNone(out.failure)
        after, _ = out.first("after")
        self.assertFalse(after["gated"])

    def test_other_stages_leave_the_lease_alone(self):
        lease = RecordingLease(SHARED)
        gate = unleased_compile.follow(lease)
        self.assertFalse(gate("run"))
        self.assertFalse(gate("compile_host"))
        self.assertEqual(lease.log, [])


class JobTimeouts(unittest.TestCase):
    def test_a_jobs_timeout_leaves_the_baselines_compile_its_own_limit(self):
        # a job's timeout is sized for a candidate; torch.compile's compile of the reference
        # keeps the limit the baselines had when it ran inside them
        from kagent_eval.worker import job_spec
        ev = types.SimpleNamespace(device="cpu", threads=1, sample_seed=1, replay_seed=2)
        spec = job_spec.normalize(ev, "verify", {
            "problem": os.path.join(ROOT, "tests", "fixtures", "eval", "relu_problem.py"),
            "candidate": "x", "timeout": 30})
        self.assertEqual(spec["timeouts"]["run"], 30.0)
        self.assertNotIn(unleased_compile.STAGE, spec["timeouts"])
        self.assertGreaterEqual(sandbox.DEFAULT_TIMEOUTS[unleased_compile.STAGE],
                                sandbox.DEFAULT_TIMEOUTS["baseline"])


class FakeChannel:
    def __init__(self, log, gate_fd=7):
        self.log, self.gate_fd, self.last_stage = log, gate_fd, "baseline"

    def stage(self, name):
        self.log.append(("stage", name))
        self.last_stage = name

    def gate(self, mode):
        self.log.append(("gate", mode))
        return True


def fake_torch(log, fail=False):
    def inductor(gm, example_inputs, **kwargs):
        log.append(("compile", gm))
        if fail:
            raise RuntimeError("LoweringException: fake")
        return "compiled:" + gm
    registry = types.ModuleType("torch._dynamo.backends.registry")
    registry.lookup_backend = lambda name: inductor if name == "inductor" else None
    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(synchronize=lambda: log.append(("sync",)))
    return torch, inductor, registry


class Backend(unittest.TestCase):
    def fake(self, log, fail=False):
        """A FAKE torch module tree: only what backend() imports, put in sys.modules for the test."""
        torch, inductor, registry = fake_torch(log, fail)
        names = ("torch", "torch._dynamo", "torch._dynamo.backends", "torch._dynamo.backends.registry")
        mods = [torch, types.ModuleType(names[1]), types.ModuleType(names[2]), registry]
        patch = mock.patch.dict(sys.modules, dict(zip(names, mods)))
        patch.start()
        self.addCleanup(patch.stop)
        return torch, inductor

    def test_compile_runs_between_giving_the_lease_up_and_the_gate(self):
        log = []
        torch, _ = self.fake(log)
        be = unleased_compile.backend(torch, FakeChannel(log), EXCLUSIVE)
        self.assertEqual(be("g1", []), "compiled:g1")
        self.assertEqual(log, [("sync",), ("stage", unleased_compile.STAGE), ("compile", "g1"),
                               ("gate", EXCLUSIVE), ("stage", "baseline")])

    def test_a_failed_compile_still_waits_at_the_gate_before_anything_runs(self):
        log = []
        torch, _ = self.fake(log, fail=True)
        be = unleased_compile.backend(torch, FakeChannel(log), SHARED)
        with self.assertRaises(RuntimeError):
            be("g1", [])
        self.assertEqual(log[-2:], [("gate", SHARED), ("stage", "baseline")])

    def test_without_a_gate_it_is_inductors_own_backend(self):
        log = []
        torch, inductor = self.fake(log)
        self.assertIs(unleased_compile.backend(torch, FakeChannel(log, gate_fd=None), SHARED), inductor)
        self.assertIs(unleased_compile.backend(torch, None, SHARED), inductor)


if __name__ == "__main__":
    unittest.main()
