"""The machine's noise told from the kernel's (kagent_eval/worker/noise.py), through real CPU-mode
workers. Machine noise is injected with the evaluator's FAKE noisy clock
(KAGENT_EVAL_FAKE_NOISY_CLOCK: the worker's next N timed windows, the kernel's and the control's
alike, read every third call 25 times too long), so the test does not depend on how busy the
machine is; kernel noise is a candidate that sleeps on some of its own calls."""
import unittest

from worker_client import Worker, fixture
from kagent_eval.worker import noise

JOB = dict(bench={"budget": 0.3, "baselines": ["eager"]})


class CpuNoiseTest(unittest.TestCase):
    def run_job(self, candidate, env=None, problem="matmul_small_problem.py", **extra):
        w = Worker("cpu", env=env)
        try:
            return w.job("benchmark", problem, fixture("eval", candidate),
                         **dict(JOB, **extra))
        finally:
            w.close()

    def test_machine_noise_is_measured_again_and_then_accepted(self):
        # noisy: the job's timed loop, the first hardened re-measure, the second (taken at once,
        # without a control) and the control after it; the worker waits, and the next re-measure
        # runs on a quiet clock
        r = self.run_job("matmul_good.py", env={noise.FAKE_CLOCK_ENV: "4"})
        self.assertTrue(r["ok"], r)
        rounds = r["trust"]["rounds"]
        self.assertEqual(len(rounds), 2, r["trust"])
        self.assertIsNone(rounds[0]["control"], rounds)
        self.assertTrue(rounds[1]["machine_noisy"], rounds)
        self.assertIn("spread", rounds[1]["flags"])
        self.assertGreater(rounds[1]["control"]["spread"], 10)
        self.assertEqual(r["trust"]["second_flags"], [])
        self.assertLess(r["time_ms"]["spread"], 10)
        self.assertTrue(r["time_ms"]["hardened"])

    def test_machine_noise_that_stays_is_not_measured(self):
        r = self.run_job("matmul_good.py", env={noise.FAKE_CLOCK_ENV: "always"})
        self.assertFalse(r["ok"], r)
        self.assertEqual((r["stage"], r["code"]), ("timing", "ENOISY"), r.get("error"))
        # the first noisy re-measure, taken again without a control, then one per control
        self.assertEqual(len(r["trust"]["rounds"]), len(noise.BACKOFF_S) + 2)
        self.assertRegex(r["error"], r"p90/p10 of the calls: first [0-9.]+, re-measure [0-9.]+")
        self.assertRegex(r["error"], r"the control \(the reference's eager forward, timed after "
                                     r"each re-measure\): p90/p10 [0-9.]+, ")
        for key in ("time_ms", "roofline", "speedup_vs_eager"):
            self.assertNotIn(key, r)

    def test_a_kernel_noisy_on_its_own_is_refused_while_the_control_is_steady(self):
        r = self.run_job("matmul_noisy_kernel.py")
        self.assertFalse(r["ok"], r)
        self.assertEqual((r["stage"], r["code"]), ("timing", "EUNTRUSTED"), r.get("error"))
        self.assertIn("vary too much", r["error"])
        self.assertIn("steady", r["error"])
        # the refusal is decided by a round whose control was steady on an unloaded host (an
        # earlier round may have found the shared machine loaded and measured again)
        self.assertIs(r["trust"]["rounds"][-1]["machine_noisy"], False, r["trust"])
        self.assertNotIn("time_ms", r)


if __name__ == "__main__":
    unittest.main()
