"""Property trials inside the problem's input contract (src/gpu/eval/inputs.py): what get_inputs
implies (signs, ranges, rows summing to one, whole numbers) is kept; a property trial outside it,
or whose reference output overflows where the regular trials' do not, is skipped with a note; a
refusal only a property trial causes is EPROPERTY. Through a real CPU-mode worker, and the
contract's rules in-process."""
import os
import sys
import types
import unittest

from worker_client import CpuWorkerTest, ROOT, fixture

sys.path.insert(0, os.path.join(ROOT, "src", "gpu", "eval"))
from kagent_eval.common import inputs  # noqa: E402


def skipped(r):
    return {s["distribution"]: s["reason"] for s in r.get("skipped_trials") or []}


class ContractJobTest(CpuWorkerTest):
    def test_a_correct_kl_divergence_is_not_refused_for_inputs_get_inputs_never_makes(self):
        r = self.w.job("verify", "kldiv_problem.py", fixture("eval", "kldiv_good.py"))
        self.assertTrue(r["ok"], r.get("error"))
        self.assertEqual(r["trials"], 5)
        notes = skipped(r)
        self.assertEqual(sorted(notes), ["huge", "negative", "nonfinite", "zeros"])
        for reason in notes.values():
            self.assertIn("outside the problem's input contract", reason)
            self.assertIn("input 0: its rows sum to one", reason)
        # the regular trials' sign flips and scales leave probability rows as drawn, and say so
        self.assertEqual([d["distribution"] for d in r["inputs_as_drawn"]],
                         ["signed", "small", "large"])
        self.assertTrue(r["input_contract"][0]["rows_sum_to_one"])

    def test_a_wrong_kl_divergence_is_still_refused(self):
        r = self.w.job("verify", "kldiv_problem.py", fixture("eval", "kldiv_no_batchmean.py"))
        self.assertFalse(r["ok"])
        self.assertEqual((r["code"], r["mismatch"]["trial"]), ("EMISMATCH", 0))

    def test_cumprod_of_inputs_in_0_1_skips_huge_values_with_a_note(self):
        r = self.w.job("verify", "cumprod_problem.py", fixture("eval", "cumprod_good.py"))
        self.assertTrue(r["ok"], r.get("error"))
        notes = skipped(r)
        self.assertIn("its values lie in [0, 1]", notes["huge"])
        self.assertIn("it is never negative", notes["negative"])
        self.assertEqual(r["property_trials"], 1)  # zeros stay inside [0, 1]

    def test_a_property_trial_the_reference_overflows_on_is_skipped_with_a_note(self):
        r = self.w.job("verify", "cumprod_signed_problem.py", fixture("eval", "cumprod_good.py"))
        self.assertTrue(r["ok"], r.get("error"))
        self.assertEqual(list(skipped(r)), ["huge"])
        self.assertIn("is not finite on these inputs, where it is on every regular trial",
                      skipped(r)["huge"])
        self.assertEqual(r["property_trials"], 2)  # zeros, negative

    def test_a_refusal_only_a_property_trial_causes_has_its_own_code(self):
        r = self.w.job("verify", "softmax_signed_problem.py", fixture("eval", "softmax_unshifted.py"))
        self.assertFalse(r["ok"])
        self.assertEqual((r["stage"], r["code"]), ("correctness", "EPROPERTY"))
        self.assertEqual((r["mismatch"]["kind"], r["mismatch"]["distribution"]), ("property", "huge"))
        self.assertFalse(r["checks"]["properties"])

    def test_unconstrained_inputs_get_every_property_trial(self):
        r = self.w.job("verify", "softmax_signed_problem.py", fixture("eval", "softmax_shifted.py"))
        self.assertTrue(r["ok"], r.get("error"))
        self.assertEqual(r["property_trials"], 3)  # zeros, negative, huge
        self.assertTrue(r["checks"]["nonfinite"])
        self.assertNotIn("skipped_trials", r)
        self.assertNotIn("inputs_as_drawn", r)

    def test_signed_regular_trials_still_expose_an_identity_relu(self):
        # uniform [0, 1) inputs are no contract for the regular trials (inputs.py)
        r = self.w.job("verify", "relu_problem.py", fixture("adversarial", "cpu_relu_identity.py"))
        self.assertFalse(r["ok"])
        self.assertEqual((r["code"], r["mismatch"]["distribution"]), ("EMISMATCH", "signed"))


def _problem(body):
    mod = types.ModuleType("problem")
    exec("import torch\n" + body, mod.__dict__)
    return mod


class ContractRuleTest(unittest.TestCase):
    def setUp(self):
        import torch
        self.torch = torch

    def contract(self, body):
        return inputs.input_contract(self.torch, _problem(body), "cpu")

    def test_facts_are_found_from_draws_of_get_inputs(self):
        c = self.contract("def get_inputs():\n    return [torch.rand(8, 16).softmax(-1), "
                          "torch.rand(8, 16), torch.randn(8, 16), torch.randint(0, 5, (8,)).float(),"
                          " torch.randint(0, 5, (8,)), torch.tanh(torch.randn(8, 16)), 3]\n")
        self.assertEqual(c[0], {"lower": 0, "upper": 1, "rows_sum_to_one": True, "integer": False})
        self.assertEqual(c[1], {"lower": 0, "upper": 1, "rows_sum_to_one": False, "integer": False})
        self.assertEqual(c[2], {"lower": None, "upper": None, "rows_sum_to_one": False,
                                "integer": False})
        self.assertTrue(c[3]["integer"])
        self.assertIsNone(c[4])  # not floating: never transformed
        self.assertEqual((c[5]["lower"], c[5]["upper"]), (-1, 1))
        self.assertIsNone(c[6])

    def test_transforms_stay_inside_the_contract(self):
        body = ("def get_inputs():\n    return [torch.rand(4, 32), torch.randn(4, 32),"
                " torch.rand(4, 32).softmax(-1)]\n")
        c = self.contract(body)
        for dist in ("zeros", "negative", "huge"):
            args, _ = inputs.make_inputs(self.torch, _problem(body), 5, 0, self.torch.float32,
                                         "cpu", dist, None, c)
            with self.subTest(dist=dist):
                self.assertGreaterEqual(float(args[0].min()), 0.0)
                self.assertLessEqual(float(args[0].max()), 1.0)
                rows = args[2].sum(-1)
                self.assertTrue(bool(((rows - 1).abs() < 1e-3).all()))
        self.assertIsNone(inputs.outside_contract("zeros", c[0]))
        self.assertEqual(inputs.outside_contract("negative", c[0]), "it is never negative")
        self.assertIsNone(inputs.outside_contract("huge", c[1]))
        # the regular trials flip the signs of [0, 1) inputs, not of probability rows
        self.assertIsNone(inputs.outside_contract("signed", c[0]))
        self.assertEqual(inputs.outside_contract("signed", c[2]), "its rows sum to one")

    def test_huge_scales_a_never_negative_input_by_positive_factors(self):
        body = "def get_inputs():\n    return [torch.rand(64, 64) * 5]\n"
        c = self.contract(body)
        self.assertEqual((c[0]["lower"], c[0]["upper"]), (0, None))
        args, _ = inputs.make_inputs(self.torch, _problem(body), 9, 0, self.torch.float32,
                                     "cpu", "huge", None, c)
        self.assertGreaterEqual(float(args[0].min()), 0.0)
        self.assertGreater(float(args[0].max()), 100.0)


if __name__ == "__main__":
    unittest.main()
