"""The all-stream check without a GPU, on synthetic activity traces (what CUPTI records on the
device): work outside the timed events fails closed. The worker's flag table is
test_trust_rules.py's; the hardened re-measure is test_hardened_retry.py's."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "src", "gpu", "eval"))
from kagent_eval.common import stream_check  # noqa: E402

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


if __name__ == "__main__":
    unittest.main()
