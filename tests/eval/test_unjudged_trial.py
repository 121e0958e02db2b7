"""A property trial whose true output is zero to the tolerance while the fp32 reference is
rounding noise around it, or on which the reference is too ill-conditioned to judge anyone
(shadow_judge._unjudged): it judges no candidate and is listed among the skipped trials; every
other trial still judges. Through a real CPU-mode worker, and the rule
on digests made by hand."""
import os
import sys
import unittest

import numpy as np

from worker_client import CpuWorkerTest, ROOT, fixture_text

sys.path.insert(0, os.path.join(ROOT, "src", "gpu", "eval"))
from kagent_eval.judge import compare  # noqa: E402

PROBLEM = "bn_gn_noise_problem.py"


def variant(name):
    return fixture_text("eval", "bn_gn_noise_variants.py", VARIANT=name)


class UnjudgedTrialJobTest(CpuWorkerTest):
    """What the product promises on any CPU: the right candidate passes and the wrong ones are
    refused. Whether this CPU's fp32 reference is noise on the all-zero trial depends on how it
    rounds the batch statistics (with ATEN_CPU_CAPABILITY=default they come out exact), so where
    a trial was skipped it is only checked to be that one; before the rule, the exact candidate
    was refused where the reference was noise ("too ill-conditioned")."""

    def test_a_right_candidate_passes(self):
        r = self.w.job("verify", PROBLEM, variant("exact"))
        self.assertTrue(r["ok"], r.get("error"))
        for skipped in r.get("skipped_trials") or []:
            self.assertEqual(skipped["distribution"], "zeros", skipped)
            self.assertIn("cannot tell a right candidate from a wrong one", skipped["reason"])

    def test_a_non_finite_output_on_the_zero_inputs_is_refused(self):
        r = self.w.job("verify", PROBLEM, variant("nan_on_zeros"))
        self.assertFalse(r["ok"])
        self.assertEqual(r["stage"], "correctness", r.get("error"))
        self.assertIn("zeros", r["error"])

    def test_a_wrong_candidate_is_refused_by_the_other_trials(self):
        r = self.w.job("verify", PROBLEM, variant("two_groups"))
        self.assertFalse(r["ok"])
        self.assertEqual(r["stage"], "correctness", r.get("error"))


def _digest(arr, dtype):
    arr = np.asarray(arr, dtype=dtype)
    return {"kind": "tensor", "dtype": np.dtype(dtype).name, "shape": [arr.size], "plain": True,
            "numel": arr.size, "full": True, "data": arr,
            "stats": {"sum": float(arr.sum()), "abs_sum": float(np.abs(arr).sum()),
                      "nonfinite": int((~np.isfinite(arr)).sum())}}


class UnjudgedRuleTest(unittest.TestCase):
    """compare_outputs with an fp64 shadow of a true output that is zero to the tolerance, a
    reference that is noise of 3e-4 around it, and a candidate whose noise is five times that
    (as a right candidate's was in the problem above)."""

    def setUp(self):
        rng = np.random.RandomState(11)
        self.shadow = rng.randn(4096) * 1e-12
        self.ref = rng.randn(4096) * 3e-4
        self.got = rng.randn(4096) * 1.5e-3

    def compare(self, got, property_trial, shadow=None, ref=None):
        s = self.shadow if shadow is None else shadow
        r = self.ref if ref is None else ref
        return compare.compare_outputs([_digest(got, np.float32)], [_digest(r, np.float32)],
                                       1e-4, 1e-4, 0, [_digest(s, np.float64)], property_trial)

    def test_a_property_trial_judges_nothing(self):
        ok, summary = self.compare(self.got, True)
        self.assertTrue(ok, summary)
        self.assertEqual(summary["shadow"][0]["rule"], "unjudged")
        self.assertIn("zero to the tolerance", summary["shadow"][0]["note"])

    def test_a_regular_trial_still_refuses(self):
        ok, summary = self.compare(self.got, False)
        self.assertFalse(ok)
        self.assertIn("too ill-conditioned", summary["reason"])

    def test_an_ill_conditioned_property_trial_judges_nothing(self):
        # the true output is not zero at one element, and the reference's noise is 19 times it
        # (relative L2): as RegNet's batch norms make of its all-zero trial
        shadow = self.shadow + np.where(np.arange(4096) == 5, 1e-3, 0.0)
        ok, summary = self.compare(self.got, True, shadow)
        self.assertTrue(ok, summary)
        self.assertEqual(summary["shadow"][0]["rule"], "unjudged")
        self.assertIn("too ill-conditioned", summary["shadow"][0]["note"])

    def test_noise_far_above_the_reference_is_refused_there(self):
        shadow = self.shadow + np.where(np.arange(4096) == 5, 1e-3, 0.0)
        ok, summary = self.compare(self.got * 20, True, shadow)
        self.assertFalse(ok)
        self.assertIn("too ill-conditioned", summary["reason"])

    def test_a_true_output_above_the_noise_is_judged(self):
        rng = np.random.RandomState(5)
        shadow = rng.randn(4096) * 1e-2
        ok, summary = self.compare(shadow + self.got, True, shadow, ref=shadow + self.ref)
        self.assertFalse(ok, "five times the reference's error against the shadow")
        self.assertNotIn("unjudged", str(summary))

    def test_non_finite_values_are_refused(self):
        got = self.got.copy()
        got[9] = np.nan
        ok, _ = self.compare(got, True)
        self.assertFalse(ok)


if __name__ == "__main__":
    unittest.main()
