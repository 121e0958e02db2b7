"""`kagent-eval check`'s terminal lines (oneshot.summary): the speedups over the baselines, and a
note where the figure is a hardened re-measure's, timed another way than the baselines were."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "src", "gpu", "eval"))
from kagent_eval.worker import oneshot  # noqa: E402


def result(hardened):
    return {"ok": True, "device": "cpu", "eager_ms": 2.0,
            "time_ms": {"median": 1.0, "p10": 0.9, "p90": 1.1, "hardened": hardened}}


class SummaryTest(unittest.TestCase):
    def test_a_figure_timed_as_the_baselines_has_no_note(self):
        text = oneshot.summary(result(False))
        self.assertIn("eager    2.0000 ms: 2.00x", text)
        self.assertNotIn("hardened", text)

    def test_a_hardened_figure_says_its_speedups_mix_two_methods(self):
        text = oneshot.summary(result(True))
        self.assertIn("eager    2.0000 ms: 2.00x", text)
        self.assertIn("the figure is the hardened re-measure's, new inputs before every call", text)
        self.assertIn("the baselines were timed on rotated inputs", text)


if __name__ == "__main__":
    unittest.main()
