"""A trial whose true output leaves float32's range (shadow_range.py): a cumulative product on
the "large" trial passes float32's largest value within about 80 elements, and which element
overflows first depends on the order of the multiplications. An honest blocked scan is
accepted, the trial's reason recorded in shadow_judged; a candidate wrong past the range or
everywhere is still refused. Through a real CPU-mode worker, and the rule on digests made by
hand."""
import os
import sys
import unittest

import numpy as np

from worker_client import CpuWorkerTest, ROOT, fixture_text

sys.path.insert(0, os.path.join(ROOT, "src", "gpu", "eval"))
from kagent_eval.judge import compare  # noqa: E402

PROBLEM = "cumprod_long_problem.py"
LARGE_TRIAL = 4  # inputs.DISTRIBUTIONS[4] == "large"


def variant(name):
    return fixture_text("eval", "cumprod_long_variants.py", VARIANT=name)


class RangeTrialJobTest(CpuWorkerTest):
    def test_an_honest_blocked_scan_is_accepted_with_the_reason(self):
        # the default tolerance, and KernelBench v0.1's (1e-2), at which the issue's kernel was
        # refused
        for tolerance in ("strict", "kernelbench-v0.1"):
            r = self.w.job("verify", PROBLEM, variant("blocked"), tolerance=tolerance)
            self.assertTrue(r["ok"], (tolerance, r.get("error")))
            judged = [e for e in r.get("shadow_judged") or [] if e.get("rule") == "range"]
            self.assertTrue(judged, (tolerance, r.get("shadow_judged")))
            self.assertEqual(judged[0]["trial"], LARGE_TRIAL)
            self.assertEqual(judged[0]["distribution"], "large")
            self.assertIn("leaves float32's range", judged[0]["note"])
            self.assertNotIn("the true output (fp64) is beyond it at 0 ", judged[0]["note"])
            # the candidate did differ from the reference there: the rule, not luck, let it pass
            self.assertIn("outside", judged[0]["dtype_reason"])

    def test_overflow_clamped_to_a_finite_value_is_refused_on_the_large_trial(self):
        r = self.w.job("verify", PROBLEM, variant("clamped"))
        self.assertFalse(r["ok"])
        self.assertEqual((r["code"], r["mismatch"]["trial"]), ("EMISMATCH", LARGE_TRIAL),
                         r.get("error"))
        self.assertIn("match neither the reference nor the true (fp64) output", r["error"])

    def test_a_cumulative_sum_is_refused(self):
        r = self.w.job("verify", PROBLEM, variant("cumsum"))
        self.assertFalse(r["ok"])
        self.assertEqual((r["code"], r["mismatch"]["trial"]), ("EMISMATCH", 0), r.get("error"))


TOP = float(np.finfo(np.float32).max)


def _digest(arr, dtype):
    arr = np.asarray(arr, dtype=dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        stats = {"sum": float(arr.sum()), "abs_sum": float(np.abs(arr).sum()),
                 "nonfinite": int((~np.isfinite(arr)).sum())}
    return {"kind": "tensor", "dtype": np.dtype(dtype).name, "shape": [arr.size], "plain": True,
            "numel": arr.size, "full": True, "data": arr, "stats": stats}


class RangeRuleTest(unittest.TestCase):
    """compare_outputs with an fp64 shadow past float32's range at its last elements."""

    def setUp(self):
        self.shadow = np.array([1.0, -2.5, 1e30, -3e37, 3.39e38, 5e38, -1e40], dtype=np.float64)
        with np.errstate(over="ignore"):
            self.ref = self.shadow.astype(np.float32)  # the rounded true output: inf at the end

    def compare(self, got):
        return compare.compare_outputs([_digest(got, np.float32)], [_digest(self.ref, np.float32)],
                                       1e-4, 1e-4, 0, [_digest(self.shadow, np.float64)])

    def test_an_earlier_overflow_of_a_large_output_passes(self):
        got = self.ref.copy()
        got[3], got[4] = -np.inf, np.inf  # another order overflowed an intermediate
        ok, summary = self.compare(got)
        self.assertTrue(ok, summary)
        self.assertEqual(summary["shadow"][0]["rule"], "range")

    def test_a_finite_value_the_reference_overflowed_on_passes_near_the_true_one(self):
        got = self.ref.copy()
        got[5] = np.float32(TOP)  # 5e38 is beyond the range: not within tolerance
        self.assertFalse(self.compare(got)[0])
        ref = self.ref.copy()
        ref[3] = -np.inf  # a running product that overflowed and came back (a GPU's scan)
        got = self.ref.copy()  # the true value, rounded
        ok, summary = compare.compare_outputs(
            [_digest(got, np.float32)], [_digest(ref, np.float32)], 1e-4, 1e-4, 0,
            [_digest(self.shadow, np.float64)])
        self.assertTrue(ok, summary)

    def test_an_infinity_where_the_true_output_is_small_is_refused(self):
        got = self.ref.copy()
        got[1] = -np.inf
        ok, summary = self.compare(got)
        self.assertFalse(ok)
        self.assertIn("match neither", summary["reason"])

    def test_a_wrong_sign_or_a_nan_is_refused(self):
        for k, value in ((6, np.inf), (5, np.nan), (3, np.inf)):
            got = self.ref.copy()
            got[k] = value
            self.assertFalse(self.compare(got)[0], (k, value))

    def test_a_trial_inside_the_range_keeps_the_first_rule(self):
        shadow = self.shadow[:4]
        ref = shadow.astype(np.float32)
        got = ref.copy()
        got[3] = -np.inf
        ok, _ = compare.compare_outputs([_digest(got, np.float32)], [_digest(ref, np.float32)],
                                        1e-4, 1e-4, 0, [_digest(shadow, np.float64)])
        self.assertFalse(ok)


if __name__ == "__main__":
    unittest.main()
