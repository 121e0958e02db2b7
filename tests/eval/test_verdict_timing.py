"""The worker's timing rules (timed_verdict.apply_benchmark): when a gap between repeated and fresh
calls is a cache, and when the reported times disagree with the worker's own clock."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "src", "gpu", "eval"))
from kagent_eval.judge import timed_verdict  # noqa: E402

OUT = [{"kind": "value", "value": 1}]


def judge(time_ms, loop_ms=None, mode="cpu", host_loaded=False, flags=None):
    result = {"flags": []}
    failed = timed_verdict.apply_benchmark(result, {"time_ms": time_ms, "last_outputs": list(OUT)},
                                           [], loop_ms, {"outputs": list(OUT)}, 1e-4, 1e-4, 7,
                                           mode, host_loaded)
    if flags is not None:
        flags.extend(result["flags"])
    return (result.get("error") or "ok").split(":")[0] if failed else "ok"


class CacheRuleTest(unittest.TestCase):
    def test_a_cached_result_is_rejected(self):
        self.assertEqual(judge({"median": 0.2, "repeat_ms": 0.19, "fresh_ms": 4.5}), "ECACHE")
        self.assertEqual(judge({"median": 0.01, "repeat_ms": 0.01, "fresh_ms": 0.5},
                               mode="cuda"), "ECACHE")

    def test_cold_copies_within_the_margin_pass(self):
        # fresh copies are cold in TLBs and caches: up to 2x slower is not a cache
        self.assertEqual(judge({"median": 2.0, "repeat_ms": 2.0, "fresh_ms": 3.9}), "ok")
        # tiny kernels: a large ratio but a gap under the absolute margin
        self.assertEqual(judge({"median": 0.01, "repeat_ms": 0.01, "fresh_ms": 0.05},
                               mode="cuda"), "ok")

    def test_repeat_time_is_compared_not_the_loop_median(self):
        # a loop median inflated by noise must not hide a cache the probe saw
        self.assertEqual(judge({"median": 5.0, "repeat_ms": 0.1, "fresh_ms": 4.0}), "ECACHE")


class ClockRuleTest(unittest.TestCase):
    def test_times_far_below_the_workers_clock_are_tampering(self):
        self.assertEqual(judge({"median": 0.01, "mean": 0.01, "n": 100}, loop_ms=103 * 8.0),
                         "ETAMPER")

    def test_the_loops_own_start_and_end_are_tolerated_in_a_short_loop(self):
        # the stop rule's 64 calls of a 30 us kernel (H100: 3.3-4.7 ms a call by the worker's
        # clock, the loop's start and end spread over few calls); many times that is not
        self.assertEqual(judge({"median": 0.03, "mean": 0.03, "n": 64}, loop_ms=67 * 4.7,
                               mode="cuda"), "ok")
        self.assertEqual(judge({"median": 0.03, "mean": 0.03, "n": 64}, loop_ms=67 * 20.0,
                               mode="cuda"), "ETAMPER")
        # the allowance is once per loop: a thousand calls get no more of it per call
        self.assertEqual(judge({"median": 0.03, "mean": 0.03, "n": 1000}, loop_ms=1003 * 4.7,
                               mode="cuda"), "ETAMPER")

    def test_an_oversubscribed_host_leaves_the_clock_unchecked_not_passed(self):
        # 1.4 ms kernels whose calls took 12 ms each while a dozen compiles held the CPUs: the
        # clock cannot tell, so the figure is flagged for the re-measure (trust.py), never let
        # through as it is
        flags = []
        self.assertEqual(judge({"median": 1.4, "mean": 1.4, "n": 64}, loop_ms=67 * 12.4,
                               mode="cuda", host_loaded=True, flags=flags), "ok")
        self.assertEqual(flags, ["clock_unchecked"])
        from kagent_eval.judge import trust
        self.assertTrue(trust.needs_remeasure(flags))
        self.assertIn("clock_unchecked", trust.NOISE_FLAGS)
        # the same loop on a host that was not busy is tampering
        self.assertEqual(judge({"median": 1.4, "mean": 1.4, "n": 64}, loop_ms=67 * 12.4,
                               mode="cuda"), "ETAMPER")

    def test_flush_and_launch_pad_are_tolerated(self):
        # a tiny kernel behind a slow launch: each timed call costs flush + a full pad
        self.assertEqual(judge({"median": 0.01, "mean": 0.01, "n": 100}, loop_ms=103 * 1.5),
                         "ok")


if __name__ == "__main__":
    unittest.main()


class FreshAddressTest(unittest.TestCase):
    """The cache probe's fresh copies never land where an earlier input was: the allocator hands
    freed blocks back, and a cache keyed by address still holds the trials' inputs."""

    def test_fresh_copies_avoid_every_freed_address(self):
        try:
            import torch
        except ImportError:
            self.skipTest("no torch")
        from kagent_eval.child import fresh_probe
        for shape, dtype in (((512, 512), torch.float32), ((300,), torch.int64),
                             ((64, 33), torch.bfloat16), ((4096,), torch.bool)):
            seen = set()
            for _ in range(20):  # inputs of earlier trials, freed
                t = torch.zeros(shape, dtype=dtype)
                seen.add(t.data_ptr())
                del t
            base = (torch.randn(shape) * 8).to(dtype)
            copies = [fresh_probe.fresh_values(torch, base, k) for k in range(1, 6)]
            for c in copies:
                self.assertNotIn(c.data_ptr(), seen, (shape, dtype))
                self.assertEqual(c.data_ptr() % 32, 0)
                self.assertEqual((c.shape, c.dtype), (base.shape, base.dtype))
                self.assertTrue(c.is_contiguous())
                # the same values (rotated where they are floating point)
                self.assertTrue(torch.equal(c.reshape(-1).float().sort()[0],
                                            base.reshape(-1).float().sort()[0]))
            self.assertEqual(len({c.data_ptr() for c in copies}), len(copies))
