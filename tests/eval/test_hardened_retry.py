"""The hardened re-measure without a GPU: remeasure.confirm_figures with its re-measures and
controls scripted, telling a kernel's noise from the machine's (see HardenedRetryTest)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "src", "gpu", "eval"))


class FakeRefs:
    """Stands in for the reference results: no peaks and no roofline (as in CPU mode), and a
    FAKE control whose timings are scripted (None: the control could not be timed)."""

    def __init__(self, controls=()):
        self.controls, self.timed = list(controls), 0

    def peaks(self, spec):
        return None

    def roofline(self, spec, trial0, median):
        return None

    def control(self, spec):
        c = self.controls[self.timed] if self.timed < len(self.controls) else self.controls[-1]
        self.timed += 1
        return (c, None) if c is not None else (None, "ERUN: the reference crashed")


class _NoRoof:
    """A FAKE evaluator for remeasure.apply_roofline: no roofline, only the speedups."""

    class refs:
        @staticmethod
        def roofline(spec, trial0, median):
            return None


STEADY = {"median": 2.0, "spread": 1.1, "n": 50}
NOISY = {"median": 2.0, "spread": 40.0, "n": 50}


class HardenedRetryTest(unittest.TestCase):
    """remeasure.confirm_figures with its hardened re-measures and controls scripted (a FAKE
    measure, FakeRefs.control): a re-measure whose only objections are noise's is followed by a
    control; a steady control twice refuses (the kernel's noise), a noisy one waits and measures
    again, up to noise.BACKOFF_S, then "not measured" (ENOISY). Any other objection rejects."""

    def confirm(self, kernel, controls=(STEADY,), first_flags=(), extra=None, probe_flags=(),
                baseline=None):
        from unittest import mock
        from kagent_eval.worker import jobs, noise, remeasure
        from kagent_eval.worker.lease import Lease
        ev = jobs.Evaluator.__new__(jobs.Evaluator)
        ev.cuda, ev.refs, ev.settle = False, FakeRefs(controls), lambda: None
        ev.lease = Lease(False, None, None)  # a device's only worker: never asks
        taken, self.waits = [], []

        def hardened(ev_, hspec, trial0, checked):
            median, spread = kernel[len(taken)] if isinstance(kernel[len(taken)], tuple) \
                else (kernel[len(taken)], 1.05)
            t = dict({"median": median, "spread": spread, "hardened": True}, **(extra or {}))
            taken.append(t)
            return {"time_ms": t, "flags": list(probe_flags[len(taken) - 1]
                                                if len(probe_flags) >= len(taken) else [])}

        result = {"ok": True, "time_ms": {"median": 1.0, "spread": 1.05, "n": 100},
                  "flags": list(first_flags)}
        if baseline:
            result["baseline_times"] = {"eager": baseline}
        spec = {"confirm": True, "max_spread": None, "bench": {}, "timeouts": {}}
        with mock.patch.object(remeasure, "hardened_measure", hardened), \
                mock.patch.object(noise, "sleep", self.waits.append):
            ok = remeasure.confirm_figures(ev, spec, result, None, ({}, {}, 1e-3, 1e-3))
        self.controls_timed = ev.refs.timed
        return ok, result, taken

    def test_an_agreeing_first_re_measure_is_enough(self):
        ok, result, taken = self.confirm([1.02, 9.0])
        self.assertTrue(ok, result)
        self.assertEqual((len(taken), self.controls_timed), (1, 0))
        self.assertNotIn("rounds", result["trust"])

    def test_confirm_alone_keeps_the_first_figure_timed_as_the_baselines_were(self):
        # one method per figure: the first loop rotated the input sets the eager baseline was
        # timed on; the hardened loop's new inputs before every call (1.9 ms, within the CPU's
        # agreement) only confirm it, so x eager divides two figures of one method
        ok, result, taken = self.confirm([1.9], baseline={"median": 1.0, "spread": 1.05})
        self.assertTrue(ok, result)
        result["eager_ms"] = 1.0
        from kagent_eval.worker import remeasure
        remeasure.apply_roofline(_NoRoof(), {}, result, None)
        self.assertEqual(result["time_ms"]["median"], 1.0)
        self.assertFalse(result["time_ms"].get("hardened", False))
        self.assertEqual(result["time_ms_hardened"]["median"], 1.9)
        self.assertEqual(result["speedup_vs_eager"], 1.0)

    def test_a_flagged_first_figure_is_replaced_by_the_re_measure(self):
        ok, result, taken = self.confirm([1.9], first_flags=["clock_unchecked"])
        self.assertTrue(ok, result)
        self.assertEqual(result["time_ms"]["median"], 1.9)
        self.assertTrue(result["time_ms"]["hardened"])
        self.assertEqual(result["time_ms_first"]["median"], 1.0)

    def test_an_objection_noise_does_not_raise_is_not_retried(self):
        ok, result, taken = self.confirm([1.0, 1.0], extra={"untimed_work": True})
        self.assertFalse(ok)
        self.assertEqual((len(taken), self.controls_timed), (1, 0))
        self.assertEqual(result["trust"]["rejected"], ["untimed_work"])

    def test_kernel_noise_with_a_steady_control_is_refused_naming_both_spreads(self):
        # cpu limit 10: the kernel's calls vary 30x in every re-measure, the control's 1.1x
        ok, result, taken = self.confirm([(1.0, 30.0)] * 4, controls=[STEADY])
        self.assertFalse(ok)
        # the first noisy re-measure is taken again without a control; the second gets one
        self.assertEqual((len(taken), self.controls_timed), (2, 1))
        self.assertEqual(result["code"], "EUNTRUSTED")
        self.assertIn("p90/p10 of the calls: first 1.05, re-measure 30, re-measure 30",
                      result["error"])
        self.assertIn("the control (the reference's eager forward, timed after each re-measure): "
                      "p90/p10 1.1, steady", result["error"])
        self.assertEqual(self.waits, [])
        self.assertNotIn("time_ms", result)

    def test_disagreeing_twice_with_a_steady_control_rejects(self):
        ok, result, taken = self.confirm([5.0, 5.0, 1.0])
        self.assertFalse(ok)
        self.assertEqual(len(taken), 2)
        self.assertEqual(result["code"], "EUNTRUSTED")
        self.assertIn("disagrees", result["error"])
        self.assertNotIn("time_ms", result)

    def test_one_burst_with_a_steady_control_is_measured_again_and_kept(self):
        ok, result, taken = self.confirm([5.0, 1.1])
        self.assertTrue(ok, result)
        self.assertEqual(len(taken), 2)
        # the first figure raised no flag: it stands, confirmed by the re-measure (1.1)
        self.assertEqual(result["time_ms"]["median"], 1.0)
        self.assertEqual(result["time_ms_hardened"]["median"], 1.1)
        self.assertEqual([r["flags"] for r in result["trust"]["rounds"]], [["remeasure_disagrees"]])
        self.assertEqual(result["trust"]["second_flags"], [])

    def test_machine_noise_waits_and_measures_again_then_accepts(self):
        # the control as noisy as the kernel: the machine's; after a wait both are quiet
        ok, result, taken = self.confirm([(1.0, 30.0), (1.0, 30.0), (1.0, 30.0), 1.01],
                                         controls=[NOISY, NOISY, STEADY])
        self.assertTrue(ok, result)
        self.assertEqual(len(taken), 4)
        from kagent_eval.worker import noise
        self.assertEqual(self.waits, list(noise.BACKOFF_S[:2]))
        # the first noisy re-measure is taken again at once, without a control
        self.assertEqual([r["machine_noisy"] for r in result["trust"]["rounds"]],
                         [None, True, True])
        self.assertEqual(result["time_ms_hardened"]["median"], 1.01)
        self.assertEqual(result["flags"], [])

    def test_a_control_that_moved_with_the_kernel_is_machine_noise(self):
        # the control's own spread is fine, but it is 3.5x its baseline: the machine changed
        ok, result, taken = self.confirm([(1.0, 30.0), (1.0, 30.0), 1.0],
                                         controls=[{"median": 7.0, "spread": 1.1}],
                                         baseline={"median": 2.0, "spread": 1.05})
        self.assertTrue(ok, result)
        self.assertEqual(result["trust"]["rounds"][1]["machine_noisy"], True)
        self.assertEqual(len(self.waits), 1)

    def test_noise_that_stays_is_not_measured_and_no_figure_rides_on_it(self):
        from kagent_eval.worker import noise
        rounds = len(noise.BACKOFF_S) + 1
        ok, result, taken = self.confirm([(1.0, 30.0)] * (rounds + 2), controls=[NOISY])
        self.assertFalse(ok)
        # one re-measure more than controls: the first noisy one is taken again without one
        self.assertEqual((len(taken), self.controls_timed), (rounds + 1, rounds))
        self.assertEqual(self.waits, list(noise.BACKOFF_S))
        self.assertEqual((result["stage"], result["code"]), ("timing", "ENOISY"))
        self.assertRegex(result["error"], r"^ENOISY: not measured: the machine was too noisy")
        self.assertIn("re-measure 30", result["error"])
        self.assertIn("p90/p10 40, 40", result["error"])
        for key in ("time_ms", "roofline", "speedup_vs_eager"):
            self.assertNotIn(key, result)

    def test_a_control_that_cannot_be_timed_fails_closed(self):
        ok, result, taken = self.confirm([(1.0, 30.0)] * 3, controls=[None])
        self.assertFalse(ok)
        self.assertEqual(result["code"], "EUNTRUSTED")
        self.assertIn("the control could not be timed: ERUN", result["error"])

    def test_a_clock_left_unchecked_by_the_hosts_load_is_measured_again(self):
        # the first re-measure ran while the host's CPUs were oversubscribed: the control was
        # too, so it is taken once more, and the second, on a quiet host, decides
        ok, result, taken = self.confirm([1.0, 1.02], first_flags=["clock_unchecked"],
                                         probe_flags=[["clock_unchecked"], []],
                                         controls=[NOISY, STEADY])
        self.assertTrue(ok, result)
        self.assertEqual(len(taken), 2)
        self.assertNotIn("clock_unchecked", result["flags"])

    def test_a_clock_unchecked_twice_with_a_steady_control_rejects_without_a_figure(self):
        ok, result, taken = self.confirm([1.0, 1.0], first_flags=["clock_unchecked"],
                                         probe_flags=[["clock_unchecked"], ["clock_unchecked"]])
        self.assertFalse(ok)
        self.assertEqual(result["code"], "EUNTRUSTED")
        self.assertIn("oversubscribed", result["error"])
        self.assertNotIn("time_ms", result)


if __name__ == "__main__":
    unittest.main()
