"""Comparable verdicts (src/gpu/eval/README.md, "Correctness"): every correctness verdict records
its largest errors and whether it would pass at KernelBench's tolerances; the job's `tolerance`
chooses between strict (the default) and KernelBench v0.1's; a likely cause of a small error is
named as a hint. Through a real CPU-mode worker, and the hint's rule in-process."""
import os
import sys
import unittest

from worker_client import CpuWorkerTest, ROOT, fixture

sys.path.insert(0, os.path.join(ROOT, "src", "gpu", "eval"))
from kagent_eval.judge import likely_cause  # noqa: E402

PROBLEM = "matmul_signed_problem.py"
TF32_LIKE = fixture("eval", "matmul_tf32_like.py")


class ToleranceJobTest(CpuWorkerTest):
    def test_tf32_error_is_refused_under_strict_and_named(self):
        r = self.w.job("verify", PROBLEM, TF32_LIKE)
        self.assertFalse(r["ok"])
        self.assertEqual((r["stage"], r["code"]), ("correctness", "EMISMATCH"))
        self.assertIn("outside atol=0.0001 rtol=0.0001", r["error"])
        self.assertEqual(r["kernelbench"], {"tolerance": "strict", "passes_current": False,
                                            "passes_v0_1": True})
        # the errors: over the judged trials, and the failing trial's own
        self.assertGreater(r["max_abs_err"], 1e-4)
        self.assertGreater(r["max_rel_err"], 1e-4)
        self.assertGreater(r["mismatch"]["max_abs_err"], 1e-4)
        self.assertLess(r["mismatch"]["rel_l2_err"], 2e-3)
        self.assertIn("TF32", r["likely_cause"])

    def test_tf32_error_is_accepted_under_kernelbench_v0_1(self):
        r = self.w.job("verify", PROBLEM, TF32_LIKE, tolerance="kernelbench-v0.1")
        self.assertTrue(r["ok"], r.get("error"))
        self.assertEqual(r["tolerance"], {"rtol": 1e-2, "atol": 1e-2})
        self.assertEqual(r["kernelbench"], {"tolerance": "kernelbench-v0.1",
                                            "passes_current": False, "passes_v0_1": True})
        self.assertGreater(r["max_abs_err"], 1e-4)
        self.assertIn("TF32", r["likely_cause"])

    def test_an_exact_kernel_passes_both_and_has_no_cause(self):
        good = fixture("eval", "matmul_good.py")
        for tolerance in ("strict", "kernelbench-v0.1"):
            with self.subTest(tolerance=tolerance):
                r = self.w.job("verify", PROBLEM, good, tolerance=tolerance)
                self.assertTrue(r["ok"], r.get("error"))
                self.assertEqual(r["kernelbench"], {"tolerance": tolerance,
                                                    "passes_current": True, "passes_v0_1": True})
                self.assertNotIn("likely_cause", r)

    def test_a_wrong_kernel_fails_both_and_no_precision_is_blamed(self):
        wrong = ("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, a, b):\n"
                 "        return torch.matmul(a, b) * 1.05\n")
        for tolerance in ("strict", "kernelbench-v0.1"):
            with self.subTest(tolerance=tolerance):
                r = self.w.job("verify", PROBLEM, wrong, tolerance=tolerance)
                self.assertFalse(r["ok"])
                self.assertEqual(r["code"], "EMISMATCH")
                self.assertEqual(r["kernelbench"], {"tolerance": tolerance,
                                                    "passes_current": False, "passes_v0_1": False})
                self.assertNotIn("likely_cause", r)

    def test_an_unknown_tolerance_is_a_bad_request(self):
        r = self.w.request("verify", {"problem": fixture("eval", PROBLEM), "candidate": TF32_LIKE,
                                      "tolerance": "loose"})
        self.assertFalse(r["ok"])
        self.assertEqual(r["code"], "EBADREQ")
        self.assertIn("tolerance must be one of strict, kernelbench-v0.1", r["error"])


class LikelyCauseRuleTest(unittest.TestCase):
    def test_matmul_and_conv_are_found_in_a_problem(self):
        for src in ("return torch.matmul(a, b)", "self.fc = nn.Linear(4, 4)", "return a @ b",
                    "nn.Conv2d(3, 8, 3)", "F.conv1d(x, w)", "torch.bmm(a, b)"):
            self.assertTrue(likely_cause.has_matmul_or_conv(src), src)
        for src in ("return torch.relu(x)", "@torch.no_grad()\ndef f(x):\n    return x.sum()"):
            self.assertFalse(likely_cause.has_matmul_or_conv(src), src)

    def test_tf32_is_named_for_an_fp32_matmul_error_spread_over_the_output(self):
        self.assertIn("TF32", likely_cause.of("fp32", 3e-4, 3.5, True))
        self.assertIn("bf16", likely_cause.of("fp32", 3e-3, 3.5, True))
        self.assertNotIn("TF32", likely_cause.of("fp32", 3e-4, 3.5, False))

    def test_no_cause_for_a_concentrated_or_large_error(self):
        self.assertIsNone(likely_cause.of("fp32", 3e-4, 64.0, True))   # one wrong element
        self.assertIsNone(likely_cause.of("fp32", 0.2, 3.0, True))     # a bug, not a rounding
        self.assertIsNone(likely_cause.of("fp32", None, None, True))
        self.assertIsNone(likely_cause.of("bf16", 0.1, 3.0, True))

    def test_accumulation_order_is_named_for_a_low_precision_job(self):
        self.assertIn("accumulation order", likely_cause.of("bf16", 5e-3, 4.0, False))


if __name__ == "__main__":
    unittest.main()
