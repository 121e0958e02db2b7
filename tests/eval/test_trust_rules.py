"""Fail-closed timing rules without a GPU: the all-stream check on synthetic activity traces
(what CUPTI records on the device) and the worker's flag table (trust.TRUST_RULES)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "src", "gpu", "eval"))
from kagent_eval import roofline, stream_check, trust  # noqa: E402

US = 1000  # ns
FLUSH = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>>(int)"
SPIN = "at::cuda::(anonymous namespace)::spin_kernel(long)"


def rec(name, start_us, end_us, stream=7, kind="kernel"):
    return {"kind": kind, "name": name, "start_ns": int(start_us * US),
            "end_ns": int(end_us * US), "stream": stream}


class Call:
    """One timed call on the device, laid out as the harness lays it out: open mark, flush,
    spin, the call's own work, close mark. Times in microseconds from the open mark."""

    def __init__(self, t0, event_us, flush_us=80.0, spin_us=20.0):
        self.t0 = t0
        self.h = t0 + 1 + flush_us + spin_us  # the call starts when flush and spin end
        self.records = [rec(FLUSH, t0 + 1, t0 + 1 + flush_us),
                        rec(SPIN, t0 + 1 + flush_us, self.h)]
        self.event_us = event_us
        self.close = self.h + event_us + 15  # the closing sync returns a little later

    def work(self, start, end, stream=7, name="my_kernel"):
        """A record at [h + start, h + end] (may be negative: before the call started)."""
        self.records.append(rec(name, self.h + start, self.h + end, stream))
        return self


def check(calls, extra=(), gap_streams=(), grace_us=50):
    records = [r for c in calls for r in c.records] + list(extra)
    windows = [(int(c.t0 * US), int(c.close * US)) for c in calls]
    end_mark = int((calls[-1].close + grace_us) * US)
    return stream_check.all_stream_check(records, windows, end_mark,
                                         [c.event_us / 1e3 for c in calls], has_spin=True,
                                         gap_streams=gap_streams)


def calls_with(event_us, fn, n=5):
    out = []
    for i in range(n):
        c = Call(i * 1000.0, event_us)
        fn(c)
        out.append(c)
    return out


class AllStreamCheckTest(unittest.TestCase):
    def test_work_on_the_timed_stream_is_covered(self):
        res = check(calls_with(50, lambda c: c.work(0.3, 20).work(20.5, 49.6)))
        self.assertTrue(res["ok"], res)
        self.assertLess(res["max_uncovered_ms"], 0.001)

    def test_a_late_start_event_is_an_idle_gap_not_work(self):
        # the host records the start event 40 us after the flush ended: the kernel (and the
        # events) start late, so the events are shorter than h..end but cover all the work
        res = check(calls_with(50, lambda c: c.work(40.5, 89.5)))
        self.assertTrue(res["ok"], res)
        self.assertLess(res["max_uncovered_ms"], 0.001)

    def test_a_side_stream_joined_back_is_covered(self):
        # side work starts after the call began and ends before the end event (joined)
        res = check(calls_with(50, lambda c: c.work(0.3, 10).work(1.0, 45, stream=9)))
        self.assertTrue(res["ok"], res)

    def test_a_short_side_stream_launch_beside_the_harness_is_caught(self):
        # the whole forward on a side stream: a 3 us kernel that ran during the spin, with
        # nothing on the timed stream (the events measure ~1 us)
        res = check(calls_with(1, lambda c: c.work(-8, -5, stream=9)))
        self.assertFalse(res["ok"])
        self.assertEqual(res["escaped_calls"], 5)
        self.assertGreater(res["max_uncovered_ms"], 0.0025)

    def test_side_work_that_outlasts_the_events_is_caught(self):
        res = check(calls_with(10, lambda c: c.work(0.2, 9).work(0.5, 60, stream=9)))
        self.assertFalse(res["ok"])
        self.assertAlmostEqual(res["max_uncovered_ms"], 0.050, delta=0.001)

    def test_a_thread_launching_after_the_call_is_caught(self):
        calls = calls_with(10, lambda c: c.work(0.2, 9.8))
        # launched by a thread after the closing sync: between two windows
        late = [rec("my_kernel", c.close + 30, c.close + 40) for c in calls[:-1]]
        res = check(calls, extra=late)
        self.assertFalse(res["ok"])
        self.assertEqual(res["outside_windows"], 4)

    def test_work_after_the_last_call_is_caught(self):
        calls = calls_with(10, lambda c: c.work(0.2, 9.8))
        res = check(calls, extra=[rec("my_kernel", calls[-1].close + 20, calls[-1].close + 25)])
        self.assertFalse(res["ok"])
        self.assertEqual(res["outside_windows"], 1)

    def test_input_preparation_on_its_own_stream_is_allowed_between_calls(self):
        calls = calls_with(10, lambda c: c.work(0.2, 9.8))
        prep = [rec("normal_kernel", c.close + 10, c.close + 30, stream=11) for c in calls[:-1]]
        self.assertFalse(check(calls, extra=prep)["ok"])
        self.assertTrue(check(calls, extra=prep, gap_streams=(11,))["ok"])
        # but not when it is still running as the next call opens
        long_prep = [rec("normal_kernel", c.close + 10, c.close + 2000, stream=11)
                     for c in calls[:-1]]
        self.assertFalse(check(calls, extra=long_prep, gap_streams=(11,))["ok"])

    def test_the_last_calls_output_sample_on_its_own_stream_is_allowed(self):
        # the harness samples every call's output on its own stream after the call's window,
        # the last one in the grace period; a kernel there on another stream is still caught
        calls = calls_with(10, lambda c: c.work(0.2, 9.8))
        sample = [rec("take_kernel", c.close + 5, c.close + 8, stream=11) for c in calls]
        self.assertTrue(check(calls, extra=sample, gap_streams=(11,))["ok"])
        late = sample + [rec("my_kernel", calls[-1].close + 20, calls[-1].close + 25)]
        res = check(calls, extra=late, gap_streams=(11,))
        self.assertFalse(res["ok"])
        self.assertEqual(res["outside_windows"], 1)

    def test_a_call_without_its_harness_cannot_be_checked(self):
        calls = calls_with(10, lambda c: c.work(0.2, 9.8))
        calls[2].records = calls[2].records[2:]  # no flush, no spin seen in that window
        res = check(calls)
        self.assertFalse(res["ok"])
        self.assertEqual(res["unchecked_calls"], 1)

    def test_copies_and_fills_count_as_work(self):
        res = check(calls_with(10, lambda c: c.work(0.2, 9.8).records.append(
            rec("memcpy 4096 B", c.h + 12, c.h + 40, stream=9, kind="memcpy"))))
        self.assertFalse(res["ok"])

    def test_one_odd_call_in_a_hundred_is_tolerated_two_are_not(self):
        def odd(k):
            def fn(c):
                c.work(0.2, 9.8)
                if int(c.t0 / 1000.0) in k:
                    c.work(-8, -5, stream=9)
            return fn
        self.assertTrue(check(calls_with(10, odd({3}), n=100))["ok"])
        res = check(calls_with(10, odd({3, 50}), n=100))
        self.assertFalse(res["ok"])
        self.assertEqual((res["escaped_calls"], res["tolerated_calls"]), (2, 1))
        # a short (adaptive) loop tolerates one, not two
        self.assertTrue(check(calls_with(10, odd({3}), n=64))["ok"])
        self.assertFalse(check(calls_with(10, odd({3, 40}), n=64))["ok"])
        # a long one, one in a hundred
        self.assertTrue(check(calls_with(10, odd({3, 150}), n=200))["ok"])
        self.assertFalse(check(calls_with(10, odd({3, 90, 150}), n=200))["ok"])

    def test_timestamps_a_microsecond_off_stay_in_their_window(self):
        calls = calls_with(10, lambda c: c.work(0.2, 9.8))
        calls[1].records[0]["start_ns"] = int(calls[1].t0 * US) - 1500  # flush "before" open
        self.assertTrue(check(calls)["ok"])

    def test_missing_windows_fail(self):
        res = stream_check.all_stream_check([], [], None, [0.1])
        self.assertFalse(res["ok"])
        self.assertFalse(res["checked"])


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
        from kagent_eval import jobs, noise, remeasure
        from kagent_eval.lease import Lease
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
        from kagent_eval import remeasure
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
        from kagent_eval import noise
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
        from kagent_eval import noise
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
