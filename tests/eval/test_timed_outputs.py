"""Every timed call's output is checked (src/gpu/eval/README.md, "Timing"): a kernel that
returns a stale output on some calls, one whose output drifts with the call count, and one that
caches results by its inputs' addresses are refused (ESTALE, stage timing), in the benchmark and
in the hardened re-measure, while honest kernels keep their figures. A real CPU-mode worker."""
import unittest

import numpy as np

from worker_client import CpuWorkerTest, fixture

BENCH = {"budget": 0.2, "min_reps": 40}
STALE = ("cpu_stale_one_in_16.py", "cpu_stale_most_calls.py", "cpu_stale_address_cache.py",
         "cpu_drift_with_calls.py")


class TimedOutputsTest(CpuWorkerTest):
    def bench(self, cand, **extra):
        return self.w.job("benchmark", "matmul_problem.py", fixture("adversarial", cand),
                          bench=dict(BENCH), **extra)

    def test_stale_and_drifting_outputs_are_refused(self):
        for cand in STALE:
            with self.subTest(candidate=cand):
                r = self.bench(cand)
                self.assertFalse(r["ok"], r)
                self.assertEqual(r["stage"], "timing", r.get("error"))
                self.assertTrue(r["error"].startswith("ESTALE: timed call "), r["error"])
                self.assertIn("stale_output", r["flags"])
                self.assertNotIn("time_ms", r)  # no figure of a refused timing survives

    def test_stale_output_is_refused_in_the_hardened_remeasure(self):
        # confirm: the figure is re-measured in a fresh process on new inputs before each call
        r = self.bench("cpu_stale_most_calls.py", confirm=True)
        self.assertFalse(r["ok"], r)
        self.assertTrue(r["error"].startswith("ESTALE:"), r["error"])

    def test_honest_kernel_is_timed_on_rotating_sets_and_checked(self):
        r = self.w.job("benchmark", "matmul_problem.py", fixture("eval", "matmul_good.py"),
                       bench=dict(BENCH), confirm=True)
        self.assertTrue(r["ok"], r.get("error"))
        timed = r["timed_outputs"]
        self.assertGreaterEqual(len(timed["sets"]), 3)
        self.assertEqual(timed["checked_calls"], timed["calls"])
        self.assertGreater(timed["sampled_per_call"], 0)
        self.assertTrue(r["trust"]["remeasured"])

    def test_timed_sets_are_the_trials_inputs_inside_the_problems_contract(self):
        # probability rows (KL divergence): the timed calls run on the trials' own inputs, made
        # by the problem's input contract, so their references match call for call
        r = self.w.job("benchmark", "kldiv_problem.py", fixture("eval", "kldiv_good.py"),
                       bench=dict(BENCH))
        self.assertTrue(r["ok"], r.get("error"))
        self.assertEqual(r["timed_outputs"]["checked_calls"], r["timed_outputs"]["calls"])


class CheckTimedOutputsRulesTest(unittest.TestCase):
    """The worker's rule on its own, with made-up samples: one call's sample off its set's
    reference fails it; within tolerance of the reference or of the candidate's own verified
    output passes; a fresh-input call equal to the call before it fails."""

    def setUp(self):
        from kagent_eval.common import timed_inputs
        from kagent_eval.judge import timed_verdict
        self.timed_verdict = timed_verdict
        self.seed = 1234
        self.numel = 64
        _, self.flat = timed_inputs.call_positions(self.numel, True, self.seed)
        rng = np.random.RandomState(0)
        self.ref = {t: rng.rand(self.numel) for t in range(3)}
        self.layout = [{"index": 0, "numel": self.numel, "full": True, "offset": 0,
                        "count": len(self.flat)}]

    def trials(self, values):
        from kagent_eval.common import inputs
        return {t: {"kind": "regular", "dist": inputs.distribution(t), "outputs": [
            {"kind": "tensor", "numel": self.numel, "full": True, "data": v}]}
            for t, v in values.items()}

    def check(self, rows, calls, sets=(0, 1, 2), own=None):
        msg = {"timed_outputs": {"layout": self.layout, "rows": len(rows), "calls": list(calls),
                                 "sets": list(sets)}, "last_outputs": []}
        result = {"flags": [], "checks": {}}
        arrays = [np.concatenate(rows)]
        failed = self.timed_verdict.check_timed_outputs(result, msg, arrays, self.trials(self.ref),
                                                        self.trials(own or {}), 1e-4, 1e-4,
                                                        self.seed)
        return failed, result

    def row(self, t, scale=1.0):
        return self.ref[t][self.flat] * scale

    def test_right_rows_pass(self):
        failed, result = self.check([self.row(0), self.row(1), self.row(2)], [0, 1, 2])
        self.assertIsNone(failed)
        self.assertEqual(result["timed_outputs"]["checked_calls"], 3)

    def test_a_row_of_another_set_fails_naming_the_call(self):
        failed, result = self.check([self.row(0), self.row(0), self.row(2)], [0, 1, 2])
        self.assertIsNotNone(failed)
        self.assertTrue(result["error"].startswith("ESTALE: timed call 2 of 3"), result["error"])

    def test_drift_beyond_tolerance_fails(self):
        failed, _ = self.check([self.row(0), self.row(1, 1.01)], [0, 1])
        self.assertIsNotNone(failed)

    def test_candidates_own_verified_output_passes(self):
        own = {1: self.ref[1] * 1.01}  # what the trials accepted for this set (a shadow verdict)
        failed, _ = self.check([self.row(0), self.row(1, 1.01)], [0, 1], own=own)
        self.assertIsNone(failed)

    def test_fresh_call_repeating_the_last_fails(self):
        # trials 0 and 3 are the problem's own distribution (what fresh calls draw from), and the
        # reference's outputs on them differ: a repeat is not chance
        self.ref[3] = np.random.RandomState(3).rand(self.numel)
        failed, result = self.check([self.row(0), self.row(0)], [None, None], sets=[0])
        self.assertIsNotNone(failed)
        self.assertIn("same output as the call before it", result["error"])

    def test_fresh_repeat_of_a_nearly_constant_output_passes(self):
        # a long sum rounded to bf16 lands on one value almost everywhere (KernelBench #4): the
        # reference repeats itself between own-distribution inputs at most positions, so honest
        # fresh calls may too; trials of other distributions (1, 2) differ and say nothing of it
        const = np.full(self.numel, 262144.0)
        self.ref[0], self.ref[3] = const.copy(), const.copy()
        self.ref[3][:3] = 263168.0
        failed, result = self.check([const[self.flat], const[self.flat], self.row(0)],
                                    [None, None, 0], sets=[0])
        self.assertIsNone(failed, result.get("error"))

    def test_fresh_repeat_is_judged_with_one_own_trial_by_the_last_call(self):
        # without a second own-distribution trial nothing says the output follows its inputs;
        # the last call (trial 0's inputs) is still checked against its reference
        failed, result = self.check([self.row(0), self.row(0), self.row(1)], [None, None, 0],
                                    sets=[0])
        self.assertIsNotNone(failed)
        self.assertIn("timed call 3 of 3", result["error"])

    def test_missing_samples_fail_closed(self):
        msg = {"timed_outputs": {"layout": self.layout, "rows": 0, "calls": [0, 1],
                                 "sets": [0, 1]}, "last_outputs": []}
        result = {"flags": [], "checks": {}}
        self.assertIsNotNone(self.timed_verdict.check_timed_outputs(
            result, msg, [], self.trials(self.ref), {}, 1e-4, 1e-4, self.seed))

    def run_gates(self, rows, calls):
        """The worker's gates on a GPU job whose audit's traced call launched nothing (a stale or
        cached output launches nothing), up to the first that refuses; the result."""
        from types import SimpleNamespace
        from kagent_eval.sandbox import sandbox
        from kagent_eval.worker import job_gates
        out = sandbox.Outcome()
        msg = {"type": "benchmark", "timed_outputs": {
            "layout": self.layout, "rows": len(rows), "calls": list(calls), "sets": [0, 1, 2]},
            "last_outputs": []}
        out.messages += [({"type": "kernels", "kernels": []}, []), (msg, [np.concatenate(rows)])]
        c = SimpleNamespace(
            spec={"bench": {}, "audit": True, "fallback_policy": "reject",
                  "fallback_threshold": 0.5, "library": "own", "candidate": "x = 1\n"},
            out=out, result={"flags": [], "checks": {}, "audit": {}},
            ev=SimpleNamespace(cuda=True, sample_seed=self.seed), ref_trials=self.trials(self.ref),
            rtol=1e-4, atol=1e-4)
        for gate in job_gates.GATES:
            if gate in (job_gates.timed_outputs, job_gates.audit) and gate(c) is not None:
                break
        return c.result

    def test_a_stale_output_is_refused_as_stale_before_the_audit_calls_it_a_fallback(self):
        result = self.run_gates([self.row(0), self.row(0), self.row(2)], [0, 1, 2])
        self.assertEqual(result.get("code"), "ESTALE", result.get("error"))

    def test_right_outputs_with_no_kernel_traced_are_still_a_fallback(self):
        result = self.run_gates([self.row(0), self.row(1), self.row(2)], [0, 1, 2])
        self.assertEqual(result.get("code"), "EFALLBACK", result.get("error"))


if __name__ == "__main__":
    unittest.main()
