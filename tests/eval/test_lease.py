"""The GPU lease, worker side, through a real CPU-mode worker started with --lease: the test
plays the pool (grants, and watches the order and mode of the protocol lines, and when the
candidate's stages ran against the holds)."""
import json
import time
import unittest

from worker_client import Worker, fixture

# the candidate's stages that run on the GPU untimed (before its gate) and timed (after it);
# "load" (the problem's module) runs nothing on the GPU and holds no lease
SHARED_STAGES = ("build", "compile", "run")
EXCLUSIVE_STAGES = ("benchmark", "benchmark_loop", "benchmark_trace", "benchmark_probe")
# untimed GPU work around the timed stages: the warm-up before the gate, the trace's analysis
# and the digests after the timed stages; these hold the lease shared, never exclusive
SHARED_ONLY_STAGES = ("warmup", "benchmark_check")


class LeasePool:
    """The pool's side of one job: answers each acquire with a grant (after hold_back[(mode, n)]
    seconds for the n-th acquire of that mode), checks that the worker holds one mode at a time
    and gives it back before it replies, and records each hold [mode, granted, released] on the
    monotonic clock the worker's stage_at uses."""

    def __init__(self, worker, hold_back=None):
        self.w = worker
        self.hold_back = hold_back or {}
        self.events = []  # ("acquire"|"granted"|"release", mode, monotonic time)
        self.holds = []

    def job(self, op, job, timeout=300):
        w = self.w
        w.next_id += 1
        w.send({"id": w.next_id, "op": op, "job": job})
        held = None
        while True:
            msg = w._read(timeout)
            if "lease" not in msg:
                assert msg.get("id") == w.next_id, msg
                assert held is None, "replied while it held the lease %s" % held[0]
                return msg
            assert msg.get("id") == w.next_id, "a lease request names its job: %r" % msg
            now = time.monotonic()
            if msg["lease"] == "acquire":
                mode = msg.get("mode")
                assert mode in ("shared", "exclusive"), msg
                assert held is None or (held[0], mode) == ("exclusive", "shared"), \
                    "asked for %s while it held %s" % (mode, held[0])
                if held is not None:  # from exclusive to shared, kept in place
                    held[2] = now
                    self.events.append(("release", held[0], now))
                self.events.append(("acquire", mode, now))
                n = sum(1 for e in self.events if e[:2] == ("acquire", mode))
                time.sleep(self.hold_back.get((mode, n), 0))
                held = [mode, time.monotonic(), None]
                self.holds.append(held)
                self.events.append(("granted", mode, held[1]))
                w.send({"lease": "granted", "mode": mode})
            else:
                assert msg["lease"] == "release", msg
                assert held is not None, "released a lease it did not hold"
                held[2] = now
                self.events.append(("release", held[0], now))
                held = None

    def times(self, kind, mode):
        return [t for k, m, t in self.events if (k, m) == (kind, mode)]

    def held_at(self, t):
        """The mode held at monotonic time t, or None."""
        for mode, granted, released in self.holds:
            if granted <= t <= released:
                return mode
        return None

    def check_stages(self, case, result):
        """Each of the candidate's stages began under the mode it needs."""
        at = result["stage_at"]
        for stage in SHARED_STAGES:
            if stage in at:
                case.assertIn(self.held_at(at[stage]), ("shared", "exclusive"),
                              "stage %s ran on the GPU without the lease" % stage)
        for stage in EXCLUSIVE_STAGES:
            if stage in at:
                case.assertEqual(self.held_at(at[stage]), "exclusive",
                                 "stage %s was timed without the exclusive lease" % stage)
        for stage in SHARED_ONLY_STAGES:
            if stage in at:
                case.assertEqual(self.held_at(at[stage]), "shared",
                                 "stage %s is untimed but held the lease %s" % (
                                     stage, self.held_at(at[stage])))


class LeaseTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.worker = Worker("cpu", args=["--lease"])

    @classmethod
    def tearDownClass(cls):
        cls.worker.close()

    def test_ready_line_says_so(self):
        self.assertIs(self.worker.ready.get("lease"), True)

    def test_verify_holds_shared_only(self):
        # the reference's outputs and the candidate's build and trials run on the GPU untimed;
        # the candidate's first shared grant is held back, and its build must not start before
        # it; the problem's module loads with no lease
        pool = LeasePool(self.worker, hold_back={("shared", 1): 0.2, ("shared", 2): 0.2})
        reply = pool.job("verify", {"problem": fixture("eval", "relu_problem.py"),
                                    "candidate": fixture("eval", "relu_good.py"),
                                    "trials": 2})
        self.assertTrue(reply["ok"], reply)
        result = reply["result"]
        self.assertTrue(result["ok"], result.get("error"))
        self.assertEqual({m for _, m, _ in pool.events}, {"shared"}, pool.events)
        self.assertGreaterEqual(len(pool.holds), 2, "the reference and the candidate each ask")
        pool.check_stages(self, result)
        at = result["stage_at"]
        self.assertIsNone(pool.held_at(at["load"]), "the problem's module loads with no lease")
        self.assertGreater(at["build"], pool.times("granted", "shared")[1],
                           "the models were built after the candidate's grant")
        self.assertEqual(pool.held_at(at["build"]), "shared")
        self.assertEqual(pool.held_at(at["compile"]), "shared")

    def test_every_timed_phase_waits_for_its_grant(self):
        # the baselines (reference child), the candidate's timed stages behind its gate, and the
        # hardened re-measure (confirm) each ask for the lease exclusive; the gate's grant is
        # held back a little, and the candidate's timed stages must start after it; its load
        # and trials ran under shared
        pool = LeasePool(self.worker, hold_back={("exclusive", 2): 0.3})
        reply = pool.job("benchmark", {
            "problem": fixture("eval", "matmul_problem.py"),
            "candidate": fixture("eval", "matmul_good.py"), "confirm": True,
            "bench": {"budget": 0.05, "baselines": ["eager"]}})
        self.assertTrue(reply["ok"], reply)
        result = reply["result"]
        self.assertTrue(result["ok"], result.get("error"))
        exclusive = pool.times("granted", "exclusive")
        self.assertEqual(len(exclusive), 3, pool.events)
        # the reference's process starts and computes its outputs under shared, and asks for
        # exclusive only at the gate before its baselines
        self.assertEqual(pool.events[0][:2], ("acquire", "shared"), pool.events)
        self.assertLess(pool.times("granted", "shared")[0], exclusive[0])
        gate_grant = exclusive[1]
        at = result["stage_at"]
        self.assertLess(at["gate"], gate_grant, "the child stopped at its gate before the grant")
        self.assertGreater(at["benchmark"], gate_grant, "nothing was timed before the grant")
        self.assertEqual(pool.held_at(at["compile"]), "shared", "the trials held it shared")
        self.assertLess(pool.times("release", "exclusive")[1],
                        pool.times("acquire", "exclusive")[2],
                        "the candidate's lease was given back before the re-measure asked")
        self.assertGreaterEqual(result["stage_s"]["gate"], 0.3, "the gate waited for the lease")
        pool.check_stages(self, result)
        # after its timed stages the child gives exclusive back and asks for shared (its exit)
        self.assertGreater(pool.times("acquire", "shared")[-1], exclusive[1],
                           "the candidate asked for shared again after its timed stages")
        # the re-measure's fresh process starts and builds the candidate under shared, and asks
        # for exclusive only at its gate (remeasure.py)
        build = [t for t in pool.times("granted", "shared") if exclusive[1] < t < exclusive[2]]
        self.assertGreaterEqual(len(build), 2, (build, pool.events))

    def test_exclusive_covers_only_the_timed_stages(self):
        # a warm-up long enough to see (CPU mode: calls, not seconds), then the timing: the
        # warm-up and the check after the loop run shared, the loop and the probe exclusive,
        # and the exclusive hold ends before the check begins
        pool = LeasePool(self.worker)
        reply = pool.job("benchmark", {
            "problem": fixture("eval", "matmul_problem.py"),
            "candidate": fixture("eval", "matmul_good.py"),
            "bench": {"budget": 0.05, "warmup": 30, "baselines": []}})
        self.assertTrue(reply["ok"], reply)
        result = reply["result"]
        self.assertTrue(result["ok"], result.get("error"))
        at = result["stage_at"]
        for stage in SHARED_ONLY_STAGES + EXCLUSIVE_STAGES:
            self.assertIn(stage, at)
        pool.check_stages(self, result)
        self.assertIn(result["time_ms"]["stop"]["by"], ("ci", "budget"))
        exclusive = [h for h in pool.holds if h[0] == "exclusive"]
        self.assertEqual(len(exclusive), 1, pool.holds)
        _, granted, released = exclusive[0]
        self.assertLess(at["warmup"], granted, "the warm-up ran before the exclusive grant")
        self.assertLessEqual(released, at["benchmark_check"],
                             "exclusive was given up before the timing's check")

    def test_no_lease_without_the_flag(self):
        solo = Worker("cpu")
        try:
            self.assertIs(solo.ready.get("lease"), False)
            result = solo.job("benchmark", "relu_problem.py", fixture("eval", "relu_good.py"),
                              bench={"budget": 0.05, "baselines": []})
            self.assertTrue(result["ok"], result.get("error"))
        finally:
            solo.close()

    def test_a_pool_gone_during_the_wait_stops_the_worker(self):
        w = Worker("cpu", args=["--lease"])
        try:
            w.next_id += 1
            w.send({"id": w.next_id, "op": "benchmark", "job": {
                "problem": fixture("eval", "relu_problem.py"),
                "candidate": fixture("eval", "relu_good.py"),
                "bench": {"budget": 0.05, "baselines": []}}})
            self.assertEqual(w._read(120).get("lease"), "acquire")  # the reference's, shared
            w.proc.stdin.close()
            self.assertEqual(w.proc.wait(timeout=60), 0)
        finally:
            if w.proc.poll() is None:
                w.proc.kill()
                w.proc.wait()
            w.proc.stdout.close()


if __name__ == "__main__":
    unittest.main()
