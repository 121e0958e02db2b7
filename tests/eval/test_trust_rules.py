"""Fail-closed timing rules without a GPU: the worker's flag table (trust.TRUST_RULES), the
speed-of-light limit, re-measure agreement and rejection. The all-stream check's traces are
test_stream_check.py's."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "src", "gpu", "eval"))
from kagent_eval.judge import trust  # noqa: E402
from kagent_eval.profile import roofline  # noqa: E402


class TrustRulesTest(unittest.TestCase):
    PEAKS = {"dram_bytes_per_s": 3.0e12, "dram_read_bytes_per_s": 3.3e12}

    def flags(self, time_ms, sol_pct=None, cuda=True):
        return trust.figure_flags(time_ms, {"sol_pct": sol_pct}, self.PEAKS, cuda)

    def test_every_flag_has_an_action_and_a_reason(self):
        for flag, (action, why) in trust.TRUST_RULES.items():
            self.assertIn(action, ("remeasure", "trigger", "reject"), flag)
            self.assertTrue(why)

    def test_a_clean_gpu_figure_raises_nothing(self):
        t = {"median": 0.05, "spread": 1.02, "all_streams": {"checked": True, "ok": True}}
        self.assertEqual(self.flags(t, sol_pct=90), [])

    def test_each_cause_raises_its_flag(self):
        ok = {"checked": True, "ok": True}
        self.assertEqual(self.flags({"median": 1, "all_streams": {"checked": True, "ok": False}}),
                         ["outside_timed_stream"])
        self.assertEqual(self.flags({"median": 1}), ["all_streams_unchecked"])
        self.assertEqual(self.flags({"median": 1, "all_streams": ok, "untimed_work": True}),
                         ["untimed_work"])
        self.assertEqual(self.flags({"median": 1, "all_streams": ok, "spread": 8.0}), ["spread"])
        self.assertEqual(self.flags({"median": 1, "all_streams": ok}, sol_pct=3418),
                         ["beyond_sol"])

    def test_the_sol_limit_is_the_memorys_specified_bandwidth_where_known(self):
        # an H100 copies at about 2.9 TB/s and torch's sum reads at about 3.0, where its HBM3 is
        # specified at 3.35: an honest split-K GEMV reading at 3.2 TB/s (110% of the copy bound)
        # is within the bound; one that skips half its reads (220%) is not
        peaks = {"dram_bytes_per_s": 2.9e12, "dram_read_bytes_per_s": 3.0e12,
                 "dram_spec_bytes_per_s": 3.35e12}
        self.assertAlmostEqual(trust.sol_limit_pct(peaks), 100.0 * 3.35 / 2.9, places=6)
        ok = {"checked": True, "ok": True}
        honest = trust.figure_flags({"median": 1, "all_streams": ok}, {"memory_sol_pct": 110},
                                      peaks, True)
        self.assertEqual(honest, [])
        skipping = trust.figure_flags({"median": 1, "all_streams": ok},
                                        {"memory_sol_pct": 220}, peaks, True)
        self.assertEqual(skipping, ["beyond_sol"])
        # a driver that does not say (None): the measured read bandwidth is the headroom
        self.assertAlmostEqual(trust.sol_limit_pct(dict(peaks, dram_spec_bytes_per_s=None)),
                               100.0 * 3.0 / 2.9, places=6)

    def test_the_sol_limit_is_measured_and_does_not_move_with_noise(self):
        # read bandwidth 10% over copy bandwidth: the only headroom over 100%
        self.assertAlmostEqual(trust.sol_limit_pct(self.PEAKS), 110.0, places=6)
        ok = {"checked": True, "ok": True}
        self.assertEqual(self.flags({"median": 1, "all_streams": ok, "spread": 1.02}, 109), [])
        self.assertEqual(self.flags({"median": 1, "all_streams": ok, "spread": 1.02}, 111),
                         ["beyond_sol"])
        # a wide spread raises its own flag and widens nothing: 130% stays beyond the bound
        self.assertEqual(self.flags({"median": 1, "all_streams": ok, "spread": 1.4}, 130),
                         ["beyond_sol"])
        self.assertEqual(
            trust.figure_flags({"median": 1, "all_streams": ok, "spread": 1.4},
                               {"sol_pct": 130}, self.PEAKS, True, max_spread=1.3),
            ["spread", "beyond_sol"])

    def test_beating_the_references_flops_is_no_flag(self):
        # diag(A) @ B done as a row scaling: far under the matmul's compute bound, well inside
        # the memory bound of its compulsory bytes
        peaks = dict(self.PEAKS, flops_per_s={"fp32": 5.0e13})
        nbytes, nflops = 4096 * 4 + 2 * 4096 * 4096 * 4, 2 * 4096 ** 3
        roof = roofline.roofline(nbytes, nflops, peaks, measured_ms=0.1, dtype="fp32")
        self.assertTrue(roof["fewer_ops"])
        self.assertEqual(roof["note"], "fewer operations than the reference")
        self.assertEqual(roof["binding"], "memory")
        self.assertLess(roof["sol_pct"], 100)
        ok = {"checked": True, "ok": True}
        self.assertEqual(trust.figure_flags({"median": 0.1, "all_streams": ok}, roof, peaks,
                                            True), [])
        # the same bytes moved faster than the bandwidth allows are still beyond the bound
        fast = roofline.roofline(nbytes, nflops, peaks, measured_ms=0.01, dtype="fp32")
        self.assertGreater(fast["memory_sol_pct"], 110)
        self.assertEqual(trust.figure_flags({"median": 0.01, "all_streams": ok}, fast, peaks,
                                            True), ["beyond_sol"])
        # a kernel slower than the compute bound keeps the compute roofline
        slow = roofline.roofline(nbytes, nflops, peaks, measured_ms=5.0, dtype="fp32")
        self.assertNotIn("fewer_ops", slow)
        self.assertEqual(slow["binding"], "compute")

    def test_cpu_mode_has_no_stream_check(self):
        self.assertEqual(self.flags({"median": 1.0, "spread": 1.2}, cuda=False), [])

    def test_remeasure_agreement(self):
        self.assertTrue(trust.agree({"median": 1.0, "spread": 1.01}, {"median": 1.05}))
        self.assertFalse(trust.agree({"median": 0.0013, "spread": 1.01}, {"median": 0.049}))
        self.assertFalse(trust.agree({"median": 1.0}, {}))

    def test_a_rejection_removes_every_figure(self):
        result = {"ok": True, "time_ms": {"median": 0.0013}, "roofline": {"sol_pct": 3418},
                  "speedup_vs_eager": 48.0, "speedup_vs_compile": 37.0, "flags": []}
        trust.reject_untrusted(result, ["outside_timed_stream", "beyond_sol"])
        self.assertEqual((result["ok"], result["stage"], result["code"]),
                         (False, "timing", "EUNTRUSTED"))
        for key in ("time_ms", "roofline", "speedup_vs_eager", "speedup_vs_compile"):
            self.assertNotIn(key, result)
        self.assertIn("outside the timed events", result["error"])
        self.assertIn("speed-of-light", result["error"])
        self.assertNotIn("3418", result["error"])


if __name__ == "__main__":
    unittest.main()
