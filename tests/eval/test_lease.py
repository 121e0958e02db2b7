"""The timing lease, worker side, through a real CPU-mode worker started with --lease: the test
plays the pool (grants, and watches the order of the protocol lines)."""
import json
import time
import unittest

from worker_client import Worker, fixture


class LeasePool:
    """The pool's side of one job: answers each acquire with a grant (after `hold_back` seconds
    for the n-th acquire), checks that acquires and releases alternate, returns the reply."""

    def __init__(self, worker, hold_back=None):
        self.w = worker
        self.hold_back = hold_back or {}
        self.events = []  # ("acquire"|"granted"|"release", monotonic time)

    def job(self, op, job, timeout=300):
        w = self.w
        w.next_id += 1
        w.send({"id": w.next_id, "op": op, "job": job})
        held = False
        while True:
            msg = w._read(timeout)
            if "lease" not in msg:
                assert msg.get("id") == w.next_id, msg
                return msg
            assert msg.get("id") == w.next_id, "a lease request names its job: %r" % msg
            now = time.monotonic()
            if msg["lease"] == "acquire":
                assert not held, "asked twice without a release"
                self.events.append(("acquire", now))
                n = sum(1 for e in self.events if e[0] == "acquire")
                time.sleep(self.hold_back.get(n, 0))
                held = True
                self.events.append(("granted", time.monotonic()))
                w.send({"lease": "granted"})
            else:
                assert msg["lease"] == "release", msg
                assert held, "released a lease it did not hold"
                held = False
                self.events.append(("release", now))

    def times(self, kind):
        return [t for k, t in self.events if k == kind]


class LeaseTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.worker = Worker("cpu", args=["--lease"])

    @classmethod
    def tearDownClass(cls):
        cls.worker.close()

    def test_ready_line_says_so(self):
        self.assertIs(self.worker.ready.get("lease"), True)

    def test_verify_times_nothing_and_asks_nothing(self):
        pool = LeasePool(self.worker)
        reply = pool.job("verify", {"problem": fixture("eval", "relu_problem.py"),
                                    "candidate": fixture("eval", "relu_good.py")})
        self.assertTrue(reply["ok"], reply)
        self.assertTrue(reply["result"]["ok"], reply["result"].get("error"))
        self.assertEqual(pool.events, [])

    def test_every_timed_phase_waits_for_its_grant(self):
        # the baselines (reference child), the candidate's timed stages behind its gate, and the
        # hardened re-measure (confirm) each ask; the gate's grant is held back a little, and
        # the candidate's timed stages must start after it
        pool = LeasePool(self.worker, hold_back={2: 0.3})
        reply = pool.job("benchmark", {
            "problem": fixture("eval", "matmul_problem.py"),
            "candidate": fixture("eval", "matmul_good.py"), "confirm": True,
            "bench": {"min_time": 0.05, "baselines": ["eager"]}})
        self.assertTrue(reply["ok"], reply)
        result = reply["result"]
        kinds = [k for k, _ in pool.events]
        self.assertEqual(kinds, ["acquire", "granted", "release"] * 3, kinds)
        gate_grant = pool.times("granted")[1]
        at = result["stage_at"]
        self.assertLess(at["gate"], gate_grant, "the child stopped at its gate before the grant")
        self.assertGreater(at["benchmark"], gate_grant, "nothing was timed before the grant")
        self.assertLess(pool.times("release")[1], pool.times("acquire")[2],
                        "the candidate's lease was given back before the re-measure asked")
        self.assertGreaterEqual(result["stage_s"]["gate"], 0.3, "the gate waited for the lease")

    def test_no_lease_without_the_flag(self):
        solo = Worker("cpu")
        try:
            self.assertIs(solo.ready.get("lease"), False)
            result = solo.job("benchmark", "relu_problem.py", fixture("eval", "relu_good.py"),
                              bench={"min_time": 0.05, "baselines": []})
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
                "bench": {"min_time": 0.05, "baselines": []}}})
            self.assertEqual(w._read(120).get("lease"), "acquire")
            w.proc.stdin.close()
            self.assertEqual(w.proc.wait(timeout=60), 0)
        finally:
            if w.proc.poll() is None:
                w.proc.kill()
                w.proc.wait()
            w.proc.stdout.close()


if __name__ == "__main__":
    unittest.main()
