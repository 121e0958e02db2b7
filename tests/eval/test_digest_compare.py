"""The sampled comparison's building blocks: sample positions and the elementwise errors.

Both run on every trial of every candidate, so they were made cheaper; these tests hold the
cheaper forms to what the comparison needs (no model, no worker)."""
import unittest

import numpy as np

from kagent_eval.common import digest
from kagent_eval.judge import compare, value_errors, verdict


class SamplePositionsTest(unittest.TestCase):
    def test_sorted_distinct_in_range_with_both_edges(self):
        for numel in (8192 * 8192, (1 << 20) + 2049, 3 * (1 << 20) + 17):
            pos = digest.sample_positions(numel, 1234)
            self.assertTrue((np.diff(pos) > 0).all(), numel)
            self.assertEqual(pos[0], 0)
            self.assertEqual(pos[-1], numel - 1)
            np.testing.assert_array_equal(pos[:1024], np.arange(1024))
            np.testing.assert_array_equal(pos[-1024:], np.arange(numel - 1024, numel))
            self.assertEqual(pos.size, digest.SAMPLE_COUNT + 2048)

    def test_every_stratum_is_sampled(self):
        # one pick per stratum: no stretch of the tensor is left out of the sample
        numel = 64 * digest.SAMPLE_COUNT
        pos = digest.sample_positions(numel, 7)
        self.assertLess(int(np.diff(pos).max()), 2 * (numel // digest.SAMPLE_COUNT))

    def test_the_seed_decides_and_both_sides_agree(self):
        a = digest.sample_positions.__wrapped__(1 << 24, 5)
        np.testing.assert_array_equal(a, digest.sample_positions.__wrapped__(1 << 24, 5))
        b = digest.sample_positions.__wrapped__(1 << 24, 6)
        self.assertGreater(int((a != b).sum()), a.size // 2)

    def test_small_tensors_are_whole(self):
        np.testing.assert_array_equal(digest.sample_positions(5000, 1), np.arange(5000))


class TensorStatsTest(unittest.TestCase):
    """The whole-tensor statistics a sampled digest carries: the data's, chunk by chunk."""

    def setUp(self):
        try:
            import torch
        except ImportError:
            self.skipTest("no torch")
        self.torch = torch
        self.chunk = digest.STATS_CHUNK
        digest.STATS_CHUNK = 1000  # several chunks, the last a short one

    def tearDown(self):
        digest.STATS_CHUNK = self.chunk

    def test_sums_and_non_finite_count_over_chunks(self):
        torch = self.torch
        x = torch.linspace(-3.0, 2.0, 4321)
        st = digest._stats(torch, x)
        a = x.numpy().astype(np.float64)
        self.assertAlmostEqual(st["sum"], float(a.sum()), delta=1e-9 * float(np.abs(a).sum()))
        self.assertAlmostEqual(st["abs_sum"], float(np.abs(a).sum()), places=6)
        self.assertEqual(st["nonfinite"], 0)
        for i, v in ((5, float("nan")), (1500, float("inf")), (4320, float("-inf")),
                     (4000, float("nan"))):
            x[i] = v
        self.assertEqual(digest._stats(torch, x)["nonfinite"], 4)

    def test_integers_and_booleans_sum_without_an_absolute_sum(self):
        torch = self.torch
        st = digest._stats(torch, torch.arange(-50, 2950, dtype=torch.int32))
        self.assertEqual((st["sum"], st["abs_sum"], st["nonfinite"]),
                         (float(sum(range(-50, 2950))), None, 0))
        self.assertEqual(digest._stats(torch, torch.arange(2500) % 3 == 0)["sum"], 834.0)


class ElementwiseErrorsTest(unittest.TestCase):
    """The all-finite path gives what the masked path gives on the same finite data."""

    def assert_same(self, g, e, rtol, atol):
        g64, e64 = g.astype(np.float64), e.astype(np.float64)
        fast = value_errors.errors_finite(g64, e64, rtol, atol)
        slow = value_errors._errors_masked(g64, e64, rtol, atol)
        np.testing.assert_array_equal(fast[0], slow[0])
        np.testing.assert_array_equal(fast[1], slow[1])
        self.assertIsNone(fast[2])
        self.assertTrue(slow[2].all())
        self.assertAlmostEqual(fast[3], slow[3], delta=1e-12 * max(1.0, slow[3]))
        self.assertAlmostEqual(fast[4], slow[4], delta=1e-9 * max(1.0, slow[4]))
        return fast

    def test_agrees_on_close_and_on_wrong_outputs(self):
        rng = np.random.default_rng(0)
        for scale in (1e-6, 1.0, 1e5):
            e = (rng.standard_normal(100_000) * scale).astype(np.float32)
            close = e * np.float32(1.00001)
            self.assertFalse(self.assert_same(close, e, 1e-4, 1e-4)[1].any())
            wrong = e.copy()
            wrong[rng.integers(0, e.size, 40)] += np.float32(max(scale, 1.0))
            self.assertTrue(self.assert_same(wrong, e, 1e-4, 1e-4)[1].any())
            self.assert_same(np.zeros_like(e), e, 1e-2, 1e-2)

    def test_exact_zero_reference(self):
        e = np.zeros(1000, dtype=np.float32)
        g = np.full(1000, 1e-3, dtype=np.float32)
        self.assert_same(g, e, 1e-4, 1e-4)

    def test_non_finite_values_take_the_masked_path(self):
        e = np.array([1.0, np.nan, np.inf, 2.0], dtype=np.float32)
        got = {"kind": "tensor", "plain": True, "dtype": "float32", "shape": [4], "numel": 4,
               "full": True, "data": e.copy()}
        exp = dict(got, data=e.copy())
        self.assertTrue(compare.compare_tensor(got, exp, 1e-4, 1e-4, 0)["ok"])
        got["data"] = np.array([1.0, 0.0, np.inf, 2.0], dtype=np.float32)
        self.assertFalse(compare.compare_tensor(got, exp, 1e-4, 1e-4, 0)["ok"])

    def test_a_non_finite_output_against_a_finite_reference_is_wrong(self):
        e = np.linspace(-1.0, 1.0, 1000).astype(np.float32)
        for bad in (np.nan, np.inf, -np.inf):
            g = e.copy()
            g[417] = bad
            self.assertIsNone(value_errors.errors_finite(g.astype(np.float64),
                                                         e.astype(np.float64), 1e-4, 1e-4))
            got = {"kind": "tensor", "plain": True, "dtype": "float32", "shape": [1000],
                   "numel": 1000, "full": True, "data": g}
            r = compare.compare_tensor(got, dict(got, data=e), 1e-4, 1e-4, 0)
            self.assertFalse(r["ok"], r)
            self.assertEqual(r["mismatch"]["index"], [417])

    def test_errors_at_the_least_allowance_are_right_and_just_above_it_wrong(self):
        # every element's allowance is at least atol: errors of exactly atol pass, and one
        # error just above it (where rtol adds nothing) is the one mismatch
        e = np.zeros(4096)
        g = np.full(4096, 1e-4)
        self.assertFalse(self.assert_same(g, e, 1e-4, 1e-4)[1].any())
        g[4000] = np.nextafter(1e-4, 1.0)
        self.assertEqual(int(self.assert_same(g, e, 1e-4, 1e-4)[1].sum()), 1)


class CompareTensorFiguresTest(unittest.TestCase):
    """compare_tensor reuses what the elementwise pass found (the largest error, the reference's
    sum of squares); its figures and verdicts stay those of the data, at float64's edges too."""

    @staticmethod
    def tensor(values, dtype=np.float32):
        a = np.asarray(values, dtype=dtype)
        return {"kind": "tensor", "plain": True, "dtype": str(a.dtype), "shape": [a.size],
                "numel": a.size, "full": True, "data": a}

    def test_the_error_figures_are_the_datas(self):
        rng = np.random.default_rng(3)
        e = rng.standard_normal(10_000).astype(np.float32)
        g = e + np.float32(1e-6) * rng.standard_normal(10_000).astype(np.float32)
        r = compare.compare_tensor(self.tensor(g), self.tensor(e), 1e-4, 1e-4, 0)
        self.assertTrue(r["ok"], r)
        d = np.abs(g.astype(np.float64) - e.astype(np.float64))
        e_norm, d_norm = np.sqrt((e.astype(np.float64) ** 2).sum()), np.sqrt((d ** 2).sum())
        self.assertAlmostEqual(r["rel_l2_err"], d_norm / e_norm, delta=1e-12)
        self.assertAlmostEqual(r["err_peak"], d.max() / (d_norm / np.sqrt(d.size)), delta=1e-9)
        self.assertEqual(r["max_abs_err"], d.max())

    def test_an_overflowing_difference_fails_and_gives_no_l2_figure(self):
        e = self.tensor([-1.5e308, 1.0, 2.0], np.float64)
        r = compare.compare_tensor(self.tensor([1.5e308, 1.0, 2.0], np.float64), e, 1e-4, 1e-4, 0)
        self.assertFalse(r["ok"])
        self.assertIn("outside", r["reason"])
        self.assertNotIn("rel_l2_err", r)

    def test_a_reference_whose_squares_overflow_still_compares(self):
        big = [1e200, -1e200, 3e200]
        self.assertTrue(compare.compare_tensor(self.tensor(big, np.float64), self.tensor(big, np.float64),
                                               1e-4, 1e-4, 0)["ok"])
        off = [1e200, -1e200, 6e200]
        self.assertFalse(compare.compare_tensor(self.tensor(off, np.float64), self.tensor(big, np.float64),
                                                1e-4, 1e-4, 0)["ok"])

    def test_a_constant_output_where_the_reference_varies_is_refused(self):
        e = 1.0 + np.linspace(0.0, 1e-6, 1000)
        r = compare.compare_tensor(self.tensor(np.ones(1000)), self.tensor(e), 1e-4, 1e-4, 0)
        self.assertFalse(r["ok"])
        self.assertIn("constant output", r["reason"])
        flat = np.full(1000, 0.5)
        self.assertTrue(compare.compare_tensor(self.tensor(flat), self.tensor(flat), 1e-4, 1e-4, 0)["ok"])


class SameDigestTest(unittest.TestCase):
    """Inputs before and after a call (digest.input_digest, compare.same_digest): the same values,
    NaN and signed zeros included, are the same; a changed element, small or moved, is seen;
    the fingerprint is the exact sum it is defined as, whatever the dtype's bit patterns."""

    @staticmethod
    def digest(values, dtype=np.float32):
        import torch
        return digest.input_digest(torch, torch.from_numpy(np.asarray(values, dtype=dtype)), 5)

    def test_the_same_values_are_the_same(self):
        for values in ([1.0, np.nan, -np.inf, 2.5], [0.0, -0.0, 1.0]):
            self.assertTrue(compare.same_digest(self.digest(values), self.digest(values)))
        # a signed zero's other sign is the same value: not a changed input
        self.assertTrue(compare.same_digest(self.digest([0.0, 1.0]), self.digest([-0.0, 1.0])))
        # and so is a NaN of another payload
        other_nan = np.array([0x7FC00001], dtype=np.uint32).view(np.float32)[0]
        self.assertTrue(compare.same_digest(self.digest([np.nan, 1.0]), self.digest([other_nan, 1.0])))
        self.assertTrue(compare.same_digest(self.digest([3, 4], np.int16), self.digest([3, 4], np.int16)))

    def test_a_changed_value_is_seen(self):
        self.assertFalse(compare.same_digest(self.digest([1.0, np.nan, 2.0]), self.digest([1.0, np.nan, 2.5])))
        self.assertFalse(compare.same_digest(self.digest([1.0, 2.0]), self.digest([1.0, np.nan])))
        a, b = self.digest([1.0, 2.0]), self.digest([1.0, 2.0 + 2 ** -22])
        b["stats"] = a["stats"]  # a change too small for the sum: the fingerprint still tells
        self.assertFalse(compare.same_digest(a, b))

    def test_moved_values_are_seen(self):
        import torch
        x = torch.randn(1 << 16, generator=torch.Generator().manual_seed(3))
        given = digest.input_digest(torch, x, 5)
        # an input's digest carries the whole-tensor sum, the only statistic same_digest reads
        self.assertEqual(given["stats"], {"sum": digest._stats(torch, x)["sum"]})
        for i, j in ((0, 1), (10, 10 + (1 << 15)), (100, 60000)):
            y = x.clone()
            y[i], y[j] = x[j], x[i]
            after = digest.input_digest(torch, y, 5)
            self.assertEqual(after["stats"]["sum"], given["stats"]["sum"])  # the sum cannot tell
            self.assertFalse(compare.same_digest(given, after), (i, j))

    def test_a_sampled_input_changed_inside_its_sample_is_seen(self):
        import torch
        n = (digest.FULL_LIMIT_BYTES // 4) * 2  # 32 MB of fp32: travels as a sample
        x = torch.zeros(n)
        given = digest.input_digest(torch, x, 9)
        self.assertFalse(given["full"])
        pos = digest.sample_positions(n, 9)
        y = x.clone()  # two sampled elements changed so that the whole-tensor sum cannot tell
        y[int(pos[len(pos) // 2])] = 1e-30
        y[int(pos[len(pos) // 3])] = -1e-30
        after = digest.input_digest(torch, y, 9)
        self.assertEqual(after["stats"]["sum"], given["stats"]["sum"])
        self.assertFalse(compare.same_digest(given, after))
        z = x.clone()
        z[int(pos[7])] = -0.0  # the same value
        self.assertTrue(compare.same_digest(given, digest.input_digest(torch, z, 9)))

    def test_the_fingerprint_is_its_exact_sum(self):
        """The device computes it in int32 products and int64 sums: checked against Python's
        integers on the extremes of each dtype's bit patterns, so no step overflows."""
        import torch
        cases = [np.array([-1, 0, np.iinfo(np.int64).min, np.iinfo(np.int64).max] * 300, np.int64),
                 np.array([np.inf, -np.inf, np.finfo(np.float64).max, -1.5] * 300, np.float64),
                 np.array([np.finfo(np.float16).max, -np.finfo(np.float16).max, 1.0] * 300, np.float16),
                 np.array([255, 0, 128] * 300, np.uint8), np.array([-128, 127] * 300, np.int8)]
        for a in cases:
            d = digest.input_digest(torch, torch.from_numpy(a), 1)
            raw = a.view(np.int16) if a.itemsize >= 2 else a.view(np.uint8)
            units = [int(u) for u in raw]
            w = [int(v) for v in digest.fingerprint_weights()[:len(units) + 1]]
            self.assertTrue(all(1 <= v < 2 ** 15 and v % 2 for v in w))
            self.assertEqual(d["fingerprint"], [sum(u * v for u, v in zip(units, w[:-1])),
                                                sum(u * v for u, v in zip(units, w[1:]))], a.dtype)
            self.assertNotIn("data", d)


class SideBySideTest(unittest.TestCase):
    def test_results_come_back_in_trial_order(self):
        def tensor(values):
            a = np.asarray(values, dtype=np.float32)
            return [{"kind": "tensor", "plain": True, "dtype": "float32", "shape": [a.size],
                     "numel": a.size, "full": True, "data": a}]
        ref = tensor(np.arange(1, 101))
        pairs = [(tensor(np.arange(1, 101)), ref) for _ in range(7)]
        pairs[4] = (tensor(np.arange(1, 101) * 2), ref)
        one = verdict.trial_comparer(1e-4, 1e-4, 0)
        got = list(verdict._compare_side_by_side(pairs, one))
        self.assertEqual([ok for ok, _, _ in got], [True] * 4 + [False] + [True] * 2)
        self.assertIn("outside", got[4][1]["reason"])
        # outcomes known already (early_checks.py) are taken at their places, the rest computed
        known = (True, {"reason": "known"}, {})
        got = list(verdict._compare_side_by_side(pairs, one, [None, known, None, None, None, known]))
        self.assertEqual([ok for ok, _, _ in got], [True] * 4 + [False] + [True] * 2)
        self.assertEqual([s.get("reason") for _, s, _ in got].count("known"), 2)
        self.assertEqual(got[1][1]["reason"], "known")
        self.assertEqual(got[5][1]["reason"], "known")
        self.assertIn("outside", got[4][1]["reason"])


if __name__ == "__main__":
    unittest.main()
