"""The timed loop's stopping rule (stop_rule.StopRule) on synthetic streams of call times: a tight
stream stops once the median's interval is narrow, a noisy one runs to its time budget, and no
stream stops below the floor. The interval itself is checked for its coverage."""
import math
import os
import random
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "src", "gpu", "eval"))
from kagent_eval.common import stop_rule, timing  # noqa: E402


def run(rule, stream):
    """Feeds call times (ms) until the rule stops; the elapsed time is the calls' own sum.
    Returns (calls, report)."""
    elapsed = 0.0
    for n, ms in enumerate(stream, 1):
        elapsed += ms / 1e3
        if rule.add(ms, elapsed):
            return n, rule.report()
    raise AssertionError("the stream ended before the rule stopped")


def draws(fn, seed=1):
    rng = random.Random(seed)
    while True:
        yield fn(rng)


def ci_rule(ci=0.005, budget_s=1.0, min_reps=10, max_reps=1000):
    return stop_rule.StopRule(min_reps, max_reps, ci=ci, budget_s=budget_s)


class StopRuleTest(unittest.TestCase):
    def test_a_tight_stream_stops_early_on_its_interval(self):
        n, rep = run(ci_rule(), draws(lambda r: 1.0 + r.gauss(0, 0.002)))
        self.assertEqual(rep["by"], "ci")
        self.assertLess(n, 100)  # a second of 1 ms calls would be a thousand
        self.assertLessEqual(rep["ci_rel"], 0.005)

    def test_a_noisy_stream_runs_to_its_budget(self):
        n, rep = run(ci_rule(budget_s=0.2), draws(lambda r: r.lognormvariate(0, 0.5)))
        self.assertEqual(rep["by"], "budget")
        self.assertGreater(rep["ci_rel"], 0.005)
        self.assertGreater(n, 100)  # about 0.2 s of ~1.1 ms calls

    def test_a_noisier_stream_needs_more_calls(self):
        n_tight, _ = run(ci_rule(), draws(lambda r: 1.0 + r.gauss(0, 0.002)))
        n_wider, rep = run(ci_rule(), draws(lambda r: 1.0 + r.gauss(0, 0.01)))
        self.assertEqual(rep["by"], "ci")
        self.assertGreater(n_wider, n_tight)

    def test_never_below_the_floor(self):
        # constant calls have a zero-width interval from the start; slow calls exceed the
        # budget at once; neither stops before min_reps
        for ms in (1.0, 500.0):
            n, rep = run(ci_rule(min_reps=25), draws(lambda r, ms=ms: ms))
            self.assertEqual(n, 25, ms)
        n, rep = run(ci_rule(min_reps=25, budget_s=0.01), draws(lambda r: r.lognormvariate(0, 1)))
        self.assertEqual((n, rep["by"]), (25, "budget"))

    def test_the_cap_ends_a_stream_that_never_settles(self):
        n, rep = run(ci_rule(budget_s=1e9, max_reps=300), draws(lambda r: r.lognormvariate(0, 1)))
        self.assertEqual((n, rep["by"]), (300, "max_reps"))

    def test_fixed_counts(self):
        n, rep = run(stop_rule.StopRule(10, 1000, reps=37), draws(lambda r: 1.0))
        self.assertEqual((n, rep["by"], rep["rule"]), (37, "reps", "reps"))
        # "time": the calls min_time takes at the first call's speed, within the floor and cap
        o = timing.bench_options({"stop": "time", "min_time": 0.2})
        self.assertEqual(stop_rule.StopRule.for_options(o, 2.0).reps, 100)
        self.assertEqual(stop_rule.StopRule.for_options(o, 1e-4).reps, o["max_reps"])
        self.assertEqual(stop_rule.StopRule.for_options(o, 500.0).reps, o["min_reps"])
        with self.assertRaises(ValueError):
            stop_rule.StopRule.for_options(dict(o, stop="sometimes"), 1.0)

    def test_a_feed_can_count_on_the_floor(self):
        # a rotation moves its sets at fractions of the calls it is told of: in "ci" mode those
        # are the floor's, which every loop reaches
        self.assertEqual(ci_rule(min_reps=12).plan, 12)
        self.assertEqual(stop_rule.StopRule(10, 1000, reps=40).plan, 40)

    def test_a_fast_kernel_is_timed_often_enough_to_meet_a_periodic_stale_output(self):
        o = timing.bench_options({})
        # 0.05 ms calls: at least CHECKED_CALLS (a stale call in every 32 is met twice)
        self.assertEqual(stop_rule.StopRule.for_options(o, 0.05).min_reps, stop_rule.CHECKED_CALLS)
        self.assertGreaterEqual(stop_rule.CHECKED_CALLS, 64)
        # 200 ms calls: the budget fits 5, so the floor stays min_reps (no more than the fixed loop)
        self.assertEqual(stop_rule.StopRule.for_options(o, 200.0).min_reps, o["min_reps"])
        # 40 ms calls: as many as the budget fits
        self.assertEqual(stop_rule.StopRule.for_options(o, 40.0).min_reps, 25)

    def test_options_default_from_the_one_table(self):
        o = timing.bench_options({"ci": 0.01, "baselines": ["eager"], "budget": None})
        self.assertEqual(o["ci"], 0.01)
        self.assertEqual(o["budget"], timing.BENCH_DEFAULTS["budget"])
        self.assertNotIn("baselines", o)


class MedianIntervalTest(unittest.TestCase):
    def test_coverage_is_about_95_percent_whatever_the_shape(self):
        rng = random.Random(7)
        shapes = {"exponential": (lambda: rng.expovariate(1.0), math.log(2.0)),
                  "uniform": (lambda: rng.random(), 0.5),
                  "bimodal": (lambda: rng.choice((1.0, 1.0, 1.0, 3.0)) + rng.random() * 0.1,
                              1.0 + 0.1 * 2.0 / 3.0)}
        for name, (draw, true_median) in shapes.items():
            for n in (15, 60, 300):
                hits = 0
                for _ in range(800):
                    lo, hi = stop_rule.median_ci(sorted(draw() for _ in range(n)))
                    hits += lo <= true_median <= hi
                self.assertGreater(hits / 800, 0.92, (name, n))
                self.assertLess(hits / 800, 0.995, (name, n))

    def test_interval_narrows_with_more_calls(self):
        rng = random.Random(3)
        widths = [stop_rule.ci_rel(sorted(1.0 + rng.gauss(0, 0.01) for _ in range(n)))
                  for n in (20, 80, 320)]
        self.assertGreater(widths[0], widths[1])
        self.assertGreater(widths[1], widths[2])
        self.assertTrue(math.isinf(stop_rule.ci_rel([1.0])))


if __name__ == "__main__":
    unittest.main()
