"""Trials where the bf16 reference is itself ill-conditioned: the fp32 shadow judges them, with
a bound tied to the reference's own error, through a real CPU-mode worker; and the rule itself
on digests, in-process."""
import os
import sys
import types
import unittest

import numpy as np

from worker_client import CpuWorkerTest, ROOT, fixture, fixture_text

sys.path.insert(0, os.path.join(ROOT, "src", "gpu", "eval"))
from kagent_eval.child import shadow  # noqa: E402
from kagent_eval.judge import compare, shadow_judge  # noqa: E402

PROBLEM = "conv_bn_relu_problem.py"
CORRECT = ("fp32_once", "bf16_conv")
WRONG = ("no_relu", "no_bn_affine", "eval_stats", "big_eps", "zeros", "one_channel")


def variant(name):
    return fixture_text("eval", "conv_bn_relu_variants.py", VARIANT=name)


class IllConditionedTrialTest(CpuWorkerTest):
    """What the product promises on any CPU: right candidates pass, wrong ones are refused. Which
    rule decides a trial (the first rule, or the fp32 shadow where the bf16 reference is itself
    off) depends on the CPU's bf16 arithmetic (AMX and AVX-512 BF16 round differently from the
    default kernels), so the shadow's own rule is pinned down by ShadowRuleTest, on digests made
    by hand, and here only checked where the job took it."""

    def test_correct_candidates_pass(self):
        for name in CORRECT:
            with self.subTest(candidate=name):
                r = self.w.job("verify", PROBLEM, variant(name), dtype="bf16")
                self.assertTrue(r["ok"], r.get("error"))
                for judged in r.get("shadow_judged") or []:
                    if judged["rule"] == "tolerance":
                        # off the reference, within the tolerance of the fp32 shadow, as the
                        # reference is (ShadowRuleTest pins the rule down)
                        self.assertEqual(judged["ref_mismatches"], 0)
                        continue
                    # passed against the shadow: within the rule's bounds, and only where the
                    # reference is itself off its shadow by more than the candidate
                    self.assertLessEqual(judged["cand_err_norm"],
                                         shadow_judge.SHADOW_FACTOR * judged["ref_err_norm"])
                    self.assertLess(judged["ref_err_norm"],
                                    shadow_judge.SHADOW_MAX_REL * judged["shadow_norm"])
                    self.assertGreater(judged["ref_mismatches"], 0)

    def test_wrong_candidates_are_refused(self):
        for name in WRONG:
            with self.subTest(candidate=name):
                r = self.w.job("verify", PROBLEM, variant(name), dtype="bf16")
                self.assertFalse(r["ok"])
                self.assertEqual((r["stage"], r["code"]), ("correctness", "EMISMATCH"),
                                 r["error"])

    def test_the_small_trial_still_refuses_what_it_alone_exposes(self):
        # epsilon 1e-3 against a variance of about 3e-5: wrong only where the inputs are small
        r = self.w.job("verify", PROBLEM, variant("big_eps"), dtype="bf16")
        self.assertFalse(r["ok"])
        self.assertEqual(r["mismatch"]["trial"], 2)
        self.assertEqual(r["mismatch"]["distribution"], "small")

    def test_fp32_jobs_have_no_shadow_on_regular_trials(self):
        r = self.w.job("verify", PROBLEM, variant("fp32_once"))
        self.assertTrue(r["ok"], r.get("error"))
        self.assertNotIn("shadow_judged", r)
        r = self.w.job("verify", PROBLEM, variant("big_eps"))
        self.assertFalse(r["ok"])
        self.assertNotIn("shadow", r["error"])

    def test_a_well_conditioned_bf16_problem_keeps_the_first_rule(self):
        good = self.w.job("verify", "relu_problem.py", fixture("eval", "relu_good.py"), dtype="bf16")
        self.assertTrue(good["ok"], good.get("error"))
        self.assertNotIn("shadow_judged", good)
        off = ("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
               "        return torch.relu(x) * 1.03\n")
        bad = self.w.job("verify", "relu_problem.py", off, dtype="bf16")
        self.assertFalse(bad["ok"])
        self.assertTrue(bad["error"].startswith("EMISMATCH: trial 0"), bad["error"])
        self.assertNotIn("shadow", bad["error"])


def _digest(values, full=True, stats=True):
    arr = np.asarray(values, dtype=np.float32)
    meta = {"kind": "tensor", "dtype": "float32", "shape": [arr.size], "plain": True,
            "numel": arr.size, "full": full, "data": arr}
    if stats:
        meta["stats"] = {"sum": float(arr.sum()), "abs_sum": float(np.abs(arr).sum()),
                         "nonfinite": int((~np.isfinite(arr)).sum())}
    return meta


class ShadowRuleTest(unittest.TestCase):
    """shadow_judge.judge_by_shadow on hand-made digests: a shadow s, a reference e = s plus a
    rounding-like error, candidates around s."""

    def setUp(self):
        rng = np.random.RandomState(7)
        self.s = rng.randn(4096)
        self.noise = rng.choice([-0.1, 0.1], size=4096) * (rng.rand(4096) < 0.2)

    def judge(self, got, ref=None, full=True):
        ref = self.s + self.noise if ref is None else ref
        return shadow_judge.judge_by_shadow(_digest(got, full), _digest(ref, full),
                                       _digest(self.s, full), 1e-2, 1e-2)

    def test_a_well_conditioned_reference_leaves_the_verdict_alone(self):
        self.assertIsNone(self.judge(self.s + 0.5, ref=self.s))

    def test_within_tolerance_of_the_shadow_as_the_reference_is_passes(self):
        # reference and candidate on either side of the fp32 result, each within its tolerance,
        # off each other by more than it (as a candidate rounding once in fp32 may be)
        ref, got = self.s + 0.009, self.s - 0.009
        ok, _ = compare.compare_outputs([_digest(got)], [_digest(ref)], 1e-2, 1e-2, 0)
        self.assertFalse(ok, "off the reference by more than the tolerance")
        r = self.judge(got, ref=ref)
        self.assertTrue(r["ok"])
        self.assertEqual((r["rule"], r["ref_mismatches"]), ("tolerance", 0))
        ok, summary = compare.compare_outputs([_digest(got)], [_digest(ref)], 1e-2, 1e-2, 0,
                                              [_digest(self.s)])
        self.assertTrue(ok, summary)
        # one element beyond the tolerance of the shadow: the reference's verdict stands
        got[17] = self.s[17] + 0.05 + 0.02 * abs(self.s[17])
        self.assertIsNone(self.judge(got, ref=ref))

    def test_an_error_like_the_references_passes(self):
        other = np.roll(self.noise, 1)  # the same size of error at other elements
        self.assertTrue(self.judge(self.s + other)["ok"])

    def test_an_error_beyond_twice_the_references_fails(self):
        r = self.judge(self.s + 2.5 * self.noise)
        self.assertFalse(r["ok"])
        self.assertIn("L2 error", r["reason"])

    def test_a_few_large_errors_fail_on_the_tail(self):
        got = self.s.copy()
        got[:4] += 1.0  # L2 within bounds, but errors the reference never makes
        r = self.judge(got)
        self.assertFalse(r["ok"])
        self.assertIn("quantile", r["reason"])

    def test_a_reference_too_far_off_its_shadow_judges_nothing(self):
        r = self.judge(self.s, ref=self.s + np.abs(self.s))
        self.assertFalse(r["ok"])
        self.assertIn("too ill-conditioned", r["reason"])

    def test_sampled_outputs_are_held_to_the_shadows_sums(self):
        got = _digest(self.s + np.roll(self.noise, 1), full=False)
        got["stats"]["sum"] += 0.5 * got["stats"]["abs_sum"]  # elements outside the sample
        r = shadow_judge.judge_by_shadow(got, _digest(self.s + self.noise, False),
                                    _digest(self.s, False), 1e-2, 1e-2)
        self.assertFalse(r["ok"])
        self.assertIn("whole-tensor sum", r["reason"])

    def test_non_finite_where_the_reference_is_finite_fails(self):
        got = self.s.copy()
        got[5] = np.nan
        self.assertFalse(self.judge(got)["ok"])

    def test_compare_outputs_uses_the_shadow_only_on_a_failing_value_check(self):
        ref, shadow = _digest(self.s + self.noise), _digest(self.s)
        ok, summary = compare.compare_outputs([_digest(self.s)], [ref], 1e-2, 1e-2, 0)
        self.assertFalse(ok)  # the rule of the reference alone
        ok, summary = compare.compare_outputs([_digest(self.s)], [ref], 1e-2, 1e-2, 0, [shadow])
        self.assertTrue(ok, summary)
        self.assertEqual(summary["shadow"][0]["output_index"], 0)
        wrong_shape = dict(_digest(self.s[:100]))
        ok, summary = compare.compare_outputs([wrong_shape], [ref], 1e-2, 1e-2, 0, [shadow])
        self.assertFalse(ok)
        self.assertEqual(summary["check"], "shape")


def _digest64(values):
    arr = np.asarray(values, dtype=np.float64)
    return {"kind": "tensor", "dtype": "float64", "shape": [arr.size], "plain": True,
            "numel": arr.size, "full": True, "data": arr}


class ConstantShadowTest(unittest.TestCase):
    """An fp32 job's fp64 shadow that is constant to fp64's rounding where the reference varies
    by its own (shadow_judge._reference_is_noise): the true output is that constant."""

    def setUp(self):
        rng = np.random.RandomState(5)
        self.s = np.full(4096, 1.0 / 96) + rng.choice([0.0, 1.7e-18], size=4096)
        self.e = (self.s + rng.randn(4096) * 3e-8).astype(np.float32)

    def judge(self, got, shadow=None):
        shadow = self.s if shadow is None else shadow
        return shadow_judge.judge_by_shadow(_digest(got), _digest(self.e), _digest64(shadow), 1e-4, 1e-4)

    def test_the_constant_passes(self):
        got = np.full(4096, 1.0 / 96, dtype=np.float32)
        ok, summary = compare.compare_outputs([_digest(got)], [_digest(self.e)], 1e-4, 1e-4, 0)
        self.assertFalse(ok, "the reference alone refuses a constant")
        self.assertIn("constant output", summary["reason"])
        r = self.judge(got)
        self.assertTrue(r["ok"], r)
        self.assertEqual(r["rule"], "tolerance")

    def test_another_constant_is_refused(self):
        r = self.judge(np.full(4096, 1.0 / 95, dtype=np.float32))
        self.assertTrue(r is None or not r["ok"], r)

    def test_a_true_output_that_varies_keeps_the_rule(self):
        shadow = np.linspace(0.0104, 0.0105, 4096)
        self.e = (shadow + 3e-8).astype(np.float32)
        self.assertIsNone(self.judge(np.full(4096, 0.01045, dtype=np.float32), shadow))


def _tf32(x, seed):
    """x rounded as TF32 rounds (10-bit mantissa: a relative error up to 2**-11), an algorithm's
    own way (seed)."""
    return x * (1 + np.random.RandomState(seed).uniform(-1, 1, x.size) * 2.0 ** -11)


class Tf32ShadowTest(unittest.TestCase):
    """An fp32 reference computed in TF32 (PyTorch's default for a GPU's fp32 convolutions)
    against its fp64 shadow: off it beyond fp32's 1e-4, so another TF32 algorithm for the same
    convolution was refused against it (shadow_judge.judge_by_shadow, shadow.py)."""

    def setUp(self):
        self.s = np.random.RandomState(11).randn(4096)
        self.e = _tf32(self.s, 1).astype(np.float32)

    def judge(self, got):
        return shadow_judge.judge_by_shadow(_digest(got), _digest(self.e), _digest64(self.s), 1e-4, 1e-4)

    def test_another_tf32_algorithm_passes(self):
        got = _tf32(self.s, 2).astype(np.float32)
        ok, _ = compare.compare_outputs([_digest(got)], [_digest(self.e)], 1e-4, 1e-4, 0)
        self.assertFalse(ok, "off the reference beyond fp32's tolerance")
        r = self.judge(got)
        self.assertTrue(r["ok"], r)
        self.assertEqual(r["rule"], "ratio")

    def test_full_fp32_passes(self):
        self.assertTrue(self.judge(self.s.astype(np.float32))["ok"])

    def test_an_error_beyond_tf32s_is_refused(self):
        got = (self.s * (1 + np.random.RandomState(3).uniform(-1, 1, 4096) * 2.0 ** -8)).astype(np.float32)
        r = self.judge(got)
        self.assertFalse(r["ok"])

    def test_only_an_fp32_job_on_a_gpu_that_allows_tf32_shadows_every_trial(self):
        def torch_with(tf32):
            cudnn = types.SimpleNamespace(allow_tf32=tf32)
            cuda = types.SimpleNamespace(matmul=types.SimpleNamespace(allow_tf32=False))
            return types.SimpleNamespace(float64="f64", float32="f32",
                                         backends=types.SimpleNamespace(cudnn=cudnn, cuda=cuda))

        def wants(torch, dtype, device, dist):
            return shadow.Shadow(torch, None, [], None, {"dtype": dtype, "device": device}).wants(dist)
        self.assertTrue(wants(torch_with(True), "fp32", "cuda:0", "normal"))
        self.assertFalse(wants(torch_with(False), "fp32", "cuda:0", "normal"))
        self.assertFalse(wants(torch_with(True), "fp32", "cpu", "normal"))
        self.assertTrue(wants(torch_with(False), "fp32", "cpu", "zeros"))
        self.assertTrue(wants(torch_with(False), "bf16", "cuda:0", "normal"))


class ShadowDigestTest(unittest.TestCase):
    """shadow.Shadow in-process on the fixture problem (trusted code: the problem's Model)."""

    def setUp(self):
        import torch
        from kagent_eval.child import shadow
        from kagent_eval.common import digest, inputs, loader
        self.torch, self.digest, self.shadow = torch, digest, shadow
        self.problem = loader.load_module("problem", fixture("eval", PROBLEM))
        init = list(self.problem.get_init_inputs())
        self.spec = {"device": "cpu", "dtype": "bf16", "seed": 42}
        self.model = loader.build_model(torch, self.problem.Model, init, 42, torch.bfloat16, "cpu")
        self.fp32 = shadow.Shadow(torch, self.problem, init, self.model, self.spec)
        self.fp32.start()
        self.args, _ = inputs.make_inputs(torch, self.problem, 44, 2, torch.bfloat16, "cpu")
        self.saved_limit = digest.FULL_LIMIT_BYTES

    def tearDown(self):
        self.digest.FULL_LIMIT_BYTES = self.saved_limit

    def test_the_shadow_model_holds_the_low_precision_weights_upcast(self):
        mine, theirs = self.fp32.model.state_dict(), self.model.state_dict()
        for key, value in theirs.items():
            self.assertEqual(mine[key].dtype if value.is_floating_point() else value.dtype,
                             self.torch.float32 if value.is_floating_point() else value.dtype)
            self.assertTrue(self.torch.equal(mine[key], value.to(mine[key].dtype)), key)

    def test_the_shadow_goes_whole_where_the_reference_output_did(self):
        # the bf16 output (64 KiB) under the limit, its fp32 shadow (128 KiB) over it
        self.digest.FULL_LIMIT_BYTES = 100000
        with self.torch.no_grad():
            out = self.model(*self.args)
        metas, _ = self.digest.digest_list(self.torch, [out], 0)
        self.assertTrue(metas[0]["full"])
        shadow_metas, arrays, note = self.fp32.digest(self.args, metas, 0)
        self.assertIsNone(note)
        self.assertTrue(shadow_metas[0]["full"])
        self.assertEqual(arrays[0][2].size, out.numel())
        self.assertEqual(shadow_metas[0]["dtype"], "float32")

    def test_fp32_jobs_shadow_only_their_all_zero_and_scaled_trials_in_fp64(self):
        from kagent_eval.common import loader
        torch, init = self.torch, list(self.problem.get_init_inputs())
        model = loader.build_model(torch, self.problem.Model, init, 42, torch.float32, "cpu")
        fp64 = self.shadow.Shadow(torch, self.problem, init, model, dict(self.spec, dtype="fp32"))
        fp64.start()
        # all-zero inputs, and the scaled ones that can leave fp32's range (shadow_range.py)
        for dist in ("zeros", "large", "huge"):
            self.assertTrue(fp64.wants(dist), dist)
        for dist in ("own", "signed", "small", "negative"):
            self.assertFalse(fp64.wants(dist), dist)
        self.assertTrue(self.fp32.wants("own"))  # bf16: every trial, in fp32
        args = [torch.zeros_like(a, dtype=torch.float32) for a in self.args]
        with torch.no_grad():
            out = model(*args)
        metas, _ = self.digest.digest_list(torch, [out], 0)
        shadow_metas, _, note = fp64.digest(args, metas, 0)
        self.assertIsNone(note)
        self.assertEqual(shadow_metas[0]["dtype"], "float64")


class Fp64ShadowTest(CpuWorkerTest):
    """fp32 jobs' all-zero trials have an fp64 shadow (shadow.py, shadow_judge.judge_by_shadow): it
    judges only where the fp32 reference is itself rounding noise around the true output."""

    def test_an_exact_batch_norm_passes_where_the_reference_is_noise(self):
        r = self.w.job("verify", "bn_noise_problem.py", fixture("eval", "bn_noise_exact.py"))
        self.assertTrue(r["ok"], r.get("error"))
        for judged in r.get("shadow_judged") or []:
            # only the all-zero trial is shadowed, and the reference was off its shadow there
            self.assertEqual(judged["distribution"], "zeros")
            self.assertGreater(judged["ref_err_norm"], judged["cand_err_norm"])

    def test_a_constant_true_output_passes_where_the_reference_varies_by_rounding(self):
        # the true softmax is exactly uniform on all-zero inputs (the fp64 shadow is constant to
        # its rounding), the fp32 reference varies by 1e-6: the exact candidate's constant output
        # was refused as "constant output where the reference varies"
        r = self.w.job("verify", "bn_softmax_problem.py", fixture("eval", "bn_softmax_exact.py"))
        self.assertTrue(r["ok"], r.get("error"))
        # whether the fp32 reference varies there depends on this CPU's rounding of the batch
        # statistics; where it did, only the all-zero trial was judged by the shadow
        for judged in r.get("shadow_judged") or []:
            self.assertEqual(judged["distribution"], "zeros")

    def test_a_small_true_output_keeps_the_magnitude_check(self):
        # the reference agrees with its fp64 shadow: zeros for a true 1e-6 offset are refused
        r = self.w.job("verify", "tiny_offset_problem.py", fixture("eval", "tiny_offset_zeros_cheat.py"))
        self.assertFalse(r["ok"])
        self.assertEqual(r["stage"], "correctness", r["error"])
        self.assertIn("zeros", r["error"])


if __name__ == "__main__":
    unittest.main()
