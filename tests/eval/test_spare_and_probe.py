"""The spare sandbox (a candidate process prepared before its job) and the noise-robust cache
probe, in-process (real forks, CPU torch) and through a real CPU-mode worker."""
import os
import sys
import tempfile
import time
import unittest

from worker_client import ROOT, Worker, fixture

sys.path.insert(0, os.path.join(ROOT, "src", "gpu", "eval"))
from kagent_eval.child import fresh_probe  # noqa: E402
from kagent_eval.common import cache_rule  # noqa: E402
from kagent_eval.sandbox import sandbox  # noqa: E402
from kagent_eval.worker import spare  # noqa: E402
from kagent_eval.common.timing import Timer  # noqa: E402


def _prep_ok(tag):
    return {"tag": tag, "pid": os.getpid(), "warmed": ["test"]}


def _prep_raises(tag):
    raise RuntimeError("no device")


def _prep_hangs(tag):
    time.sleep(60)


def _echo(ch, spec, state):
    ch.stage("run")
    ch.send({"type": "echo", "spec": spec, "tag": state["tag"], "prep_pid": state["pid"],
             "pid": os.getpid()})


def _gated(ch, spec, state):
    ch.stage("load")
    state["gate"]("shared")
    ch.stage("compile")
    state["gate"]("exclusive")
    ch.stage("benchmark")
    ch.send({"type": "timed"})


def _list_fds(ch):
    links = []
    for name in os.listdir("/proc/self/fd"):
        try:
            links.append(os.readlink("/proc/self/fd/" + name))
        except OSError:
            pass
    ch.send({"type": "fds", "links": links})


class SpareTest(unittest.TestCase):
    def test_job_runs_in_the_prepared_process(self):
        sp = spare.Spare(_prep_ok, _echo, ("t1",))
        out = sp.run({"x": 1}, {})
        self.assertIsNotNone(out)
        self.assertIsNone(out.failure)
        echo, _ = out.first("echo")
        self.assertEqual(echo["spec"], {"x": 1})
        self.assertEqual(echo["tag"], "t1")
        self.assertEqual(echo["prep_pid"], echo["pid"])
        self.assertEqual(out.prepared["warmed"], ["test"])
        self.assertNotIn("ready", [o.get("type") for o, _ in out.messages])

    def test_each_part_waits_at_its_gate(self):
        sp = spare.Spare(_prep_ok, _gated, ("t5",))
        seen = []

        def on_stage(name):
            seen.append(name)
            if name in ("gate_shared", "gate"):
                time.sleep(0.3)  # the lease not granted yet
                sp.open_gate()

        out = sp.run({}, {}, on_stage)
        self.assertIsNone(out.failure)
        self.assertEqual(seen, ["load", "gate_shared", "compile", "gate", "benchmark"])
        stages = {o["stage"]: o["t"] for o, _ in out.messages if o.get("type") == "stage"}
        self.assertGreaterEqual(stages["compile"] - stages["gate_shared"], 0.29)
        self.assertGreaterEqual(stages["benchmark"] - stages["gate"], 0.29)
        self.assertIsNotNone(out.first("timed")[0])

    def test_failed_preparation_means_no_spare(self):
        sp = spare.Spare(_prep_raises, _echo, ("t2",))
        self.assertIsNone(sp.run({"x": 2}, {}))
        self.assertIsNone(sp.pid)

    def test_hung_preparation_is_killed(self):
        sp = spare.Spare(_prep_hangs, _echo, ("t3",), prep_timeout=0.5)
        pid = sp.pid
        t0 = time.monotonic()
        self.assertIsNone(sp.run({"x": 3}, {}))
        self.assertLess(time.monotonic() - t0, 15)
        with self.assertRaises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)

    def test_other_children_cannot_reach_the_spare(self):
        # a candidate holding the spare's job pipe could hand it a forged job
        sp = spare.Spare(_prep_ok, _echo, ("t4",))
        try:
            out = sandbox.run_child(_list_fds)
            fds, _ = out.first("fds")
            for fd in (sp.spec_w, sp.rfd):
                self.assertNotIn(os.readlink("/proc/self/fd/%d" % fd), fds["links"])
        finally:
            sp.discard()


class _Memo:
    """Stands in for a candidate that caches its result by input address."""

    def __init__(self, torch):
        self.torch, self.memo = torch, {}

    def __call__(self, a, b):
        key = (a.data_ptr(), b.data_ptr())
        if key not in self.memo:
            self.memo[key] = self.torch.mm(a, b)
        return self.memo[key].clone()


class _Hiccup:
    """An honest matmul whose 2nd and 3rd calls are held up as by a preempted core."""

    def __init__(self, torch):
        self.torch, self.calls = torch, 0

    def __call__(self, a, b):
        self.calls += 1
        if self.calls in (2, 3):
            time.sleep(0.3)  # a stall far above any honest call, even on a loaded machine
        return self.torch.mm(a, b)


class ProbeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import torch
        cls.torch = torch
        cls.timer = Timer(torch, "cpu")
        cls.args = [torch.rand(256, 256), torch.rand(256, 256)]

    def test_address_cache_shows_as_a_gap(self):
        cand = _Memo(self.torch)
        cand(*self.args)
        p = fresh_probe.probe(self.torch, self.timer, cand, self.args)
        self.assertGreaterEqual(p["n"], 5)
        self.assertLess(p["repeat_ms"], cache_rule.CACHE_RATIO * p["fresh_ms"])

    def test_copies_made_ahead_of_the_timed_calls_still_show_an_address_cache(self):
        # the copies are made before the timed loop (while the lease is shared); the candidate
        # runs its timed calls meanwhile and must still meet them as fresh in the probe
        ahead = fresh_probe.prepare(self.torch, self.args, "cpu")
        self.assertIsNotNone(ahead)
        cand = _Memo(self.torch)
        for _ in range(3):
            cand(*self.args)
        seen = set(cand.memo)
        self.assertFalse(any((c[0].data_ptr(), c[1].data_ptr()) in seen for c in ahead))
        p = fresh_probe.probe(self.torch, self.timer, cand, self.args, ahead)
        self.assertGreaterEqual(p["n"], len(ahead))
        self.assertLess(p["repeat_ms"], cache_rule.CACHE_RATIO * p["fresh_ms"])
        # the probe ran the candidate on the copies made ahead
        self.assertTrue(all((c[0].data_ptr(), c[1].data_ptr()) in cand.memo for c in ahead))

    def test_copies_are_made_ahead_only_where_they_fit(self):
        gib = 1 << 30

        class FakeCuda:  # a FAKE torch.cuda whose free memory is set
            free = 0

            def mem_get_info(self):
                return self.free, 100 * gib
        fake = type("FakeTorch", (), {"cuda": FakeCuda()})()
        # two copies and one copy's temporary: 3 GiB, against half the free memory
        fake.cuda.free = 6 * gib
        self.assertTrue(fresh_probe.fits_ahead(fake, "cuda:0", gib, 2))
        fake.cuda.free = 6 * gib - 1
        self.assertFalse(fresh_probe.fits_ahead(fake, "cuda:0", gib, 2))

    def test_one_slow_call_does_not_look_like_a_cache(self):
        cand = _Hiccup(self.torch)
        p = fresh_probe.probe(self.torch, self.timer, cand, self.args)
        self.assertLess(p["fresh_ms"], 250.0)  # the 300 ms stalls are not the minimum
        self.assertFalse(cache_rule.looks_cached(p["repeat_ms"], p["fresh_ms"], "cpu"))


class WorkerSpareTest(unittest.TestCase):
    def test_consecutive_jobs_use_prepared_sandboxes(self):
        w = Worker("cpu")
        try:
            for _ in range(3):
                r = w.job("benchmark", "relu_problem.py", fixture("eval", "relu_good.py"),
                          bench={"budget": 0.05, "min_reps": 5, "baselines": []})
                self.assertTrue(r["ok"], r)
                self.assertTrue(r["prepared"])
                # the probe ran in the prepared sandbox: its figures are the first measure's
                # (a loaded machine's spread may have had the job re-measured, hardened)
                self.assertIsNotNone(r.get("time_ms_first", r["time_ms"])["repeat_ms"])
        finally:
            w.close()

    def test_spare_can_be_turned_off(self):
        os.environ["KAGENT_EVAL_SPARE"] = "0"
        try:
            w = Worker("cpu")
        finally:
            del os.environ["KAGENT_EVAL_SPARE"]
        try:
            r = w.job("verify", "relu_problem.py", fixture("eval", "relu_good.py"))
            self.assertTrue(r["ok"], r)
            self.assertFalse(r["prepared"])
        finally:
            w.close()


if __name__ == "__main__":
    unittest.main()
