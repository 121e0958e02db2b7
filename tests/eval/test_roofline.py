"""CPU tests of the roofline arithmetic: compulsory bytes, flops and bounds of the showcase
problems against REFERENCE.md section 1.
Run alone: /usr/bin/python3 -m unittest tests/eval/test_roofline.py"""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "src", "gpu", "eval"))

from kagent_eval.profile import roofline  # noqa: E402

try:
    import torch
except ImportError:  # the pyenv python on PATH has no torch
    torch = None

H100_PEAKS = {"dram_bytes_per_s": 3.0e12, "flops_per_s": {"bf16": 7.0e14, "fp32": 5.0e13}}


@unittest.skipIf(torch is None, "torch not installed")
class Roofline(unittest.TestCase):
    """Bounds of the five showcase problems against REFERENCE.md section 1 (bf16, 3.0 TB/s)."""

    def bf16(self, *shape):
        return torch.empty(*shape, dtype=torch.bfloat16, device="meta")

    def check(self, inputs, output, params, ref_gb, ref_ms, nflops=0):
        nbytes = roofline.compulsory_bytes(inputs, output, params)
        self.assertLess(abs(nbytes / 1e9 - ref_gb) / ref_gb, 0.02, nbytes)
        r = roofline.roofline(nbytes, nflops, H100_PEAKS, measured_ms=2 * ref_ms)
        self.assertLess(abs(r["lower_bound_ms"] - ref_ms) / ref_ms, 0.02, r)
        self.assertEqual(r["binding"], "memory")
        self.assertAlmostEqual(r["sol_pct"], r["lower_bound_ms"] / (2 * ref_ms) * 100)
        return r

    def test_4_gemv(self):
        self.check([self.bf16(2048, 1048576), self.bf16(1048576, 1)], self.bf16(2048, 1), [],
                   4.30, 1.43, nflops=2 * 2048 * 1048576)

    def test_36_rmsnorm(self):
        self.check([self.bf16(112, 64, 512, 512)], self.bf16(112, 64, 512, 512), [], 7.52, 2.51)

    def test_43_maxpool(self):
        self.check([self.bf16(16, 32, 128, 128, 128)], self.bf16(16, 32, 62, 62, 62), [],
                   2.39, 0.80)

    def test_77_conv_transpose_counts_the_full_output(self):
        conv = torch.nn.ConvTranspose3d(32, 64, 3, stride=2, padding=1, dilation=2, bias=False)
        x = torch.zeros(1, 32, 16, 32, 32)
        out = conv(x)
        self.assertEqual(tuple(out.shape[2:]), (33, 65, 65))
        nflops = roofline.analytic_flops(conv, [self.bf16(16, 32, 16, 32, 32)], out)
        self.assertEqual(nflops, 2 * 16 * 32 * 16 * 32 * 32 * 64 * 27)
        self.check([self.bf16(16, 32, 16, 32, 32)], self.bf16(16, 64, 33, 65, 65),
                   [conv.to(torch.bfloat16)], 0.30, 0.10, nflops=nflops)

    def test_82_depthwise(self):
        conv = torch.nn.Conv2d(64, 64, 3, groups=64, bias=False).to(torch.bfloat16)
        self.check([self.bf16(16, 64, 512, 512)], self.bf16(16, 64, 510, 510), [conv],
                   1.07, 0.36)

    def test_compute_bound_case(self):
        r = roofline.roofline(1e9, 1e15, H100_PEAKS, measured_ms=None)
        self.assertEqual(r["binding"], "compute")
        self.assertIsNone(r["sol_pct"])
        self.assertAlmostEqual(r["compute_bound_ms"], 1e15 / 7.0e14 * 1e3)

    def test_flops_of_a_small_conv(self):
        conv = torch.nn.Conv2d(4, 8, 3, bias=False)
        x = torch.randn(2, 4, 10, 10)
        self.assertEqual(roofline.flops(conv, [x]), 2 * 2 * 8 * 8 * 8 * 4 * 9)

    def test_peaks_are_cached_in_memory(self):
        roofline._PEAKS["Fake GPU"] = {"dram_bytes_per_s": 1.0}
        try:
            self.assertIn("Fake_GPU", roofline._cache_path("Fake GPU"))
        finally:
            del roofline._PEAKS["Fake GPU"]


if __name__ == "__main__":
    unittest.main()
