"""Only one process at a time can use a GPU's profiler: another process's metric check or profile
gets CUPTI_ERROR_HARDWARE_BUSY (EBUSY). The lease keeps two profiles of one GPU apart, not a
spare's preparation from a profile, so a profile waits for the profiler (profiling.when_free)
instead of failing, and a busy profiler never sends it to another replay mode; a preparation
ahead of a profile does not wait. The spare sets up the activity trace. Without a GPU: the library
is a FAKE that answers EBUSY a set number of times."""
import os
import re
import time
import unittest
from unittest import mock

from kagent_eval.child import warmup
from kagent_eval.profile import profiler_lib, profiling
from kagent_eval.profile.profiler_error import ProfilerError
from test_profiling_replay import FakeTorch

COUNTER = "gpu__time_duration.sum"


class FakeBusyLib:
    """A FAKE libkagent_prof: the first `busy` calls of `busy_call` raise EBUSY (or `error`);
    a metric check then supports every metric, and a profile gives one range per launch."""

    path = "fake"

    def __init__(self, busy_call, busy, error="EBUSY", launches=2):
        self.busy_call, self.busy, self.error, self.launches = busy_call, busy, error, launches
        self.calls = []
        self.last = None

    def call(self, name, *args):
        self.calls.append(name)
        self.last = name
        if name == self.busy_call and self.busy > 0:
            self.busy -= 1
            raise ProfilerError(self.error, "%s: CUPTI_ERROR_HARDWARE_BUSY (fake)" % name)
        if name == "kp_profile_begin":
            self.mode = args[2]
        if name == "kp_profile_pass_end":
            args[0]._obj.value = 1

    def result(self):
        if self.last == "kp_metrics_check":
            return {"chip": "FAKE", "supported": [COUNTER], "unsupported": [], "passes": 1}
        ranges = [{"range": str(i), "metrics": {COUNTER: 1000.0}} for i in range(self.launches)]
        return {"passes": 1, "dropped": 0, "ranges": ranges}


def launches(n):
    return [{"name": "k%d" % i, "duration_ms": 0.1, "grid": [1, 1, 1], "block": [32, 1, 1],
             "registers": 16, "shared_mem": 0} for i in range(n)]


class BusyProfiler(unittest.TestCase):
    def use(self, lib):
        profiling._checks.clear()
        self.addCleanup(profiling._checks.clear)
        for target, value in (("ready", lambda device: (FakeTorch, lib)),
                              ("trace_kernels", lambda fn, device: launches(lib.launches)),
                              ("BUSY_POLL_S", 0.001)):
            patcher = mock.patch.object(profiling, target, value)
            patcher.start()
            self.addCleanup(patcher.stop)
        return lib

    def test_a_profiles_metric_check_waits_while_another_process_holds_the_profiler(self):
        lib = self.use(FakeBusyLib("kp_metrics_check", busy=3))
        check = profiling.check_metrics([COUNTER], 0, wait_s=5.0)
        self.assertEqual(check["supported"], [COUNTER])
        self.assertEqual(lib.calls.count("kp_metrics_check"), 4)

    def test_the_wait_ends(self):
        lib = self.use(FakeBusyLib("kp_metrics_check", busy=10 ** 6))
        started = time.monotonic()
        with self.assertRaises(ProfilerError) as caught:
            profiling.check_metrics([COUNTER], 0, wait_s=0.05)
        self.assertEqual(caught.exception.code, "EBUSY")
        self.assertGreaterEqual(time.monotonic() - started, 0.05)
        self.assertGreater(lib.calls.count("kp_metrics_check"), 1)

    def test_other_errors_are_not_waited_for(self):
        lib = self.use(FakeBusyLib("kp_metrics_check", busy=1, error="ECUPTI"))
        with self.assertRaises(ProfilerError) as caught:
            profiling.check_metrics([COUNTER], 0, wait_s=5.0)
        self.assertEqual(caught.exception.code, "ECUPTI")
        self.assertEqual(lib.calls.count("kp_metrics_check"), 1)

    def test_a_preparation_ahead_does_not_wait(self):
        # a spare's or a job's preparation before its gate: the profile stage makes it later
        lib = self.use(FakeBusyLib("kp_metrics_check", busy=1))
        with self.assertRaises(ProfilerError) as caught:
            profiling.prepare_set([COUNTER], 0)
        self.assertEqual(caught.exception.code, "EBUSY")
        self.assertEqual(lib.calls.count("kp_metrics_check"), 1)
        self.assertEqual(profiling.check_metrics([COUNTER], 0)["supported"], [COUNTER])

    def test_a_busy_profiler_keeps_the_profile_in_its_replay_mode(self):
        lib = self.use(FakeBusyLib("kp_profile_begin", busy=2))
        res = profiling.profile(lambda: None, [COUNTER], 0, replay="user")
        self.assertEqual(res["replay"], "user")
        self.assertIsNone(res.get("replay_error"))
        self.assertEqual(lib.mode, profiling.REPLAY_MODES["user"])
        self.assertEqual(lib.calls.count("kp_profile_begin"), 3)
        # the result says how long of it was waiting: two polls at least
        self.assertGreaterEqual(res["profiler_wait_s"], 2 * profiling.BUSY_POLL_S)
        self.assertLess(res["profiler_wait_s"], res["profile_s"])

    def test_a_free_profiler_is_not_waited_for(self):
        self.use(FakeBusyLib("kp_profile_begin", busy=0))
        res = profiling.profile(lambda: None, [COUNTER], 0, replay="user")
        self.assertEqual(res["profiler_wait_s"], 0)

    def test_the_first_passs_set_up_is_reported(self):
        class SlowFirstPass(FakeBusyLib):
            """CUPTI sets a new profiler object up in its first pass's start (FAKE: 50 ms)."""
            def call(self, name, *args):
                if name == "kp_profile_pass_begin" and name not in self.calls:
                    time.sleep(0.05)
                return FakeBusyLib.call(self, name, *args)
        self.use(SlowFirstPass("kp_profile_begin", busy=0))
        res = profiling.profile(lambda: None, [COUNTER], 0, replay="user")
        self.assertGreaterEqual(res["first_pass_s"], 0.05)
        self.assertLess(res["first_pass_s"], res["profile_s"])

    def test_a_wait_for_the_metric_check_is_counted_too(self):
        self.use(FakeBusyLib("kp_metrics_check", busy=3))
        res = profiling.profile(lambda: None, [COUNTER], 0, replay="user")
        self.assertGreaterEqual(res["profiler_wait_s"], 3 * profiling.BUSY_POLL_S)

    def test_a_profiler_busy_past_the_wait_fails_the_profile(self):
        self.use(FakeBusyLib("kp_profile_begin", busy=10 ** 6))
        with mock.patch.object(profiling, "BUSY_WAIT_S", 0.02), \
                self.assertRaises(ProfilerError) as caught:
            profiling.profile(lambda: None, [COUNTER], 0, replay="user")
        self.assertEqual(caught.exception.code, "EBUSY")


class ErrorCodes(unittest.TestCase):
    def test_the_c_abis_codes_are_the_pythons(self):
        root = os.path.join(os.path.dirname(__file__), "..", "..")
        with open(os.path.join(root, "src/gpu/profiler/include/kagent_prof.h")) as f:
            header = f.read()
        codes = {int(n): "E" + name for name, n in re.findall(r"KP_E([A-Z]+) = (\d+)", header)}
        self.assertEqual(codes, profiler_lib._CODES)
        self.assertEqual(codes[7], "EBUSY")


class FakeTensorTorch:
    """What warmup.host asks of torch when Triton is absent: one allocation."""

    @staticmethod
    def empty(*args, **kw):
        return object()


class SpareSetsUpTheTrace(unittest.TestCase):
    def test_the_trace_is_set_up_ahead_and_timed(self):
        made = []
        with mock.patch.object(warmup, "_touch", None), \
                mock.patch.object(profiling, "prepare_trace", lambda device: made.append(device)):
            warmed, _ = warmup.host(FakeTensorTorch, profile=False)
        self.assertEqual(made, [0])
        self.assertIn("trace_setup", warmed)

    def test_a_trace_that_cannot_be_set_up_is_left_to_the_job(self):
        def fail(device):
            raise ProfilerError("ENOTSUP", "no libkagent_prof (fake)")
        with mock.patch.object(warmup, "_touch", None), \
                mock.patch.object(profiling, "prepare_trace", fail):
            warmed, _ = warmup.host(FakeTensorTorch, profile=False)
        self.assertNotIn("trace_setup", warmed)


if __name__ == "__main__":
    unittest.main()
