"""Timer's GPU-side logic (launch pad, time-based warm-up) against a fake torch.cuda whose
events read a simulated GPU clock, so it runs on a machine without a GPU."""
import contextlib
import os
import sys
import types
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "src", "gpu", "eval"))
from kagent_eval.common import stop_rule, timing  # noqa: E402


class FakeGpu:
    """A single in-order stream: work queued in ms of GPU time; the host clock is simulated."""

    def __init__(self, cycles_per_ms=2.0e6):
        self.now = 0.0  # host ms
        self.gpu_free_at = 0.0
        self.cycles_per_ms = cycles_per_ms
        self.spins = []

    def enqueue(self, ms):
        self.gpu_free_at = max(self.gpu_free_at, self.now) + ms
        return self.gpu_free_at

    def host(self, ms):
        self.now += ms


class FakeEvent:
    def __init__(self, gpu):
        self.gpu, self.t = gpu, None

    def record(self):
        self.t = self.gpu.enqueue(0.0)

    def elapsed_time(self, other):
        return other.t - self.t


class FakeTorch:
    int32 = "int32"

    def __init__(self, gpu):
        self.gpu = gpu
        torch = self

        class Buf:
            def zero_(self):
                torch.gpu.host(0.005)
                torch.gpu.enqueue(0.08)  # the L2 flush

        class Cuda:
            @staticmethod
            def synchronize():
                torch.gpu.now = max(torch.gpu.now, torch.gpu.gpu_free_at)

            @staticmethod
            def Event(enable_timing=True):
                return FakeEvent(torch.gpu)

            class Stream:  # one in-order queue: a side stream waits like the device
                cuda_stream = 0

                def synchronize(self):
                    Cuda.synchronize()

            @staticmethod
            def stream(_s):
                return contextlib.nullcontext()

            @staticmethod
            def _sleep(cycles):
                torch.gpu.spins.append(cycles)
                torch.gpu.host(0.005)
                torch.gpu.enqueue(cycles / torch.gpu.cycles_per_ms)

        self.cuda = Cuda
        self._buf = Buf

    def empty(self, *a, **k):
        return self._buf()


class TimerFakeCudaTest(unittest.TestCase):
    def setUp(self):
        self.gpu = FakeGpu()
        self.clock = lambda: self.gpu.now / 1e3
        self._saved = timing._perf_counter, timing.cuda_driver.own_stream
        timing._perf_counter = self.clock
        # the fake's one in-order queue stands for the driver stream the timer makes itself
        timing.cuda_driver.own_stream = lambda torch, device: torch.cuda.Stream()
        self.timer = timing.Timer(FakeTorch(self.gpu), "cuda:0")

    def tearDown(self):
        timing._perf_counter, timing.cuda_driver.own_stream = self._saved

    def kernel(self, launch_ms, gpu_ms):
        def fn():
            self.gpu.host(launch_ms)  # Python, guards, launch
            self.gpu.enqueue(gpu_ms)
        return fn

    def test_spin_rate_is_calibrated(self):
        self.assertAlmostEqual(self.timer.cycles_per_ms, 2.0e6, delta=1e3)

    def test_a_timer_built_uncalibrated_runs_nothing_until_its_calibration(self):
        # a spare builds its timer without the lease: no flush, no spin on the GPU until the job
        # holds the lease and calibrates it (child_candidate._load), or a figure first needs it
        gpu = FakeGpu(cycles_per_ms=3.0e6)
        timer = timing.Timer(FakeTorch(gpu), "cuda:0", calibrate=False)
        self.assertEqual((gpu.spins, gpu.gpu_free_at), ([], 0.0))
        timer.calibrate()
        spins = len(gpu.spins)
        self.assertGreater(spins, 0)
        self.assertAlmostEqual(timer.cycles_per_ms, 3.0e6, delta=1e3)
        timer.calibrate()  # once only
        self.assertEqual(len(gpu.spins), spins)
        lazy = timing.Timer(FakeTorch(FakeGpu()), "cuda:0", calibrate=False)
        self.assertGreater(lazy.flush_ms, 0.0)  # read before calibrate(): measured then

    def test_slow_launch_is_hidden_behind_the_pad(self):
        fn = self.kernel(launch_ms=0.3, gpu_ms=1.0)
        without_pad, _ = self.timer.time_once(fn)
        self.assertGreater(without_pad, 1.15)  # the launch gap lands inside the events
        res = self.timer.measure(fn, warmup=1, reps=5, warmup_time=0.0)
        self.assertGreater(res["pad_ms"], 0.3)
        self.assertAlmostEqual(res["median"], 1.0, delta=0.02)
        self.assertAlmostEqual(res["wall_median"], 1.0, delta=0.1)  # pad and flush taken off
        self.assertNotIn("untimed_work", res)

    def test_fast_launch_needs_no_pad(self):
        res = self.timer.measure(self.kernel(0.01, 1.0), warmup=1, reps=5, warmup_time=0.0)
        self.assertEqual(res["pad_ms"], 0.0)
        self.assertAlmostEqual(res["median"], 1.0, delta=0.01)

    def test_pad_is_bounded(self):
        self.timer.measure(self.kernel(5.0, 1.0), warmup=1, reps=2, warmup_time=0.0)
        self.assertLessEqual(self.timer.pad_ms, timing.MAX_PAD_MS)

    def test_steady_calls_stop_at_the_floor_and_the_fixed_loop_runs_its_time(self):
        fn = self.kernel(0.01, 1.0)
        res = self.timer.measure(fn, warmup=1, warmup_time=0.0, min_reps=12)
        # 1 ms calls: the budget fits the checked calls, the floor of a fast kernel
        self.assertEqual((res["n"], res["stop"]["by"]), (stop_rule.CHECKED_CALLS, "ci"))
        fixed = self.timer.measure(fn, warmup=1, warmup_time=0.0, stop="time", min_time=0.1)
        self.assertGreaterEqual(fixed["n"], 90)  # 100 ms of 1 ms calls
        self.assertEqual(fixed["stop"]["by"], "reps")
        self.assertAlmostEqual(res["median"], fixed["median"], delta=0.01)

    def test_calls_done_comes_after_every_call_and_before_the_trace_is_read(self):
        gpu, seen = self.gpu, {}

        class SlowTrace:  # reading the activity trace takes host time (a loaded host's)
            def begin(self):
                pass

            def mark(self):
                return gpu.now

            def end(self):
                seen["read_at"] = gpu.now
                gpu.host(500.0)
                return []

        self.timer.tracer = SlowTrace()

        def done():
            seen["done_at"], seen["gpu_idle"] = gpu.now, gpu.now >= gpu.gpu_free_at

        loop = self.timer.timed_loop(self.kernel(0.01, 0.05), warmup=1, reps=20,
                                     warmup_time=0.0, calls_done=done)
        self.assertEqual(len(loop["events"]), 20)
        self.assertTrue(seen["gpu_idle"], "every call's work had finished")
        self.assertLessEqual(seen["done_at"], seen["read_at"])

    def test_hardened_reset_of_l2_is_announced_untimed_work(self):
        """The hardened loop resets the persisting-L2 set-aside before every call. That is the
        harness's work: where it is slow (a driver call on a busy GPU), the worker's clock must
        not count it as the candidate's calls (ETAMPER's bound, timed_verdict.loop_ms)."""
        from kagent_eval.child import candidate_timing
        from kagent_eval.judge import timed_verdict
        gpu, resets, messages = self.gpu, [], []

        class Channel:  # the candidate's channel: the worker stamps each stage on its own clock
            def stage(self, name):
                messages.append(({"type": "stage", "stage": name, "t": gpu.now / 1e3}, None))

        class Inputs:  # a feed's fresh inputs: a little host and GPU work
            def before(self, i, reps):
                gpu.host(0.01)
                gpu.enqueue(0.01)

        def reset():
            resets.append(gpu.now)
            gpu.host(8.0)  # a slow reset

        self.timer._reset_persisting_l2 = reset
        ch = Channel()
        feed = candidate_timing._AnnouncedFeed(ch, Inputs(), self.timer._sync, lambda: None)
        ch.stage("benchmark_loop")
        res = self.timer.measure(self.kernel(0.01, 0.05), feed=feed, hardened=True, reps=20,
                                 warmup=1, warmup_time=0.0)
        ch.stage("benchmark_check")
        self.assertEqual(len(resets), 20, "one reset before every timed call")
        for at in resets:  # each inside an announced stretch: after a prep, before the loop's
            stage = [m["stage"] for m, _ in messages if m["t"] * 1e3 <= at][-1]
            self.assertEqual(stage, "benchmark_prep")
        per_call = timed_verdict.loop_ms(types.SimpleNamespace(messages=messages)) / (res["n"] + 3)
        self.assertLess(per_call, 3 * res["median"] + 1.0 + timing.MAX_PAD_MS)

    def test_warm_up_lasts_its_minimum_duration(self):
        calls = self.timer.warm(self.kernel(0.01, 2.0), calls=3, seconds=0.1)
        self.assertGreaterEqual(calls, 50)  # 100 ms of 2 ms calls
        self.assertEqual(self.timer.warm(self.kernel(0.01, 2.0), calls=3, seconds=0.0), 3)


if __name__ == "__main__":
    unittest.main()
