"""CPU tests of the profiler's driving: CPU-mode unavailability and the replay modes (their
fallback chain, the C ABI's numbers, the cache sweep) around a FAKE libkagent_prof.
Run alone: /usr/bin/python3 -m unittest tests/eval/test_profiling_replay.py"""
import os
import sys
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "src", "gpu", "eval"))

from kagent_eval.profile import profiler_lib, profiling  # noqa: E402

try:
    import torch
except ImportError:  # the pyenv python on PATH has no torch
    torch = None


class CpuMode(unittest.TestCase):
    @unittest.skipIf(torch is None, "torch not installed")
    def test_unavailable_with_a_reason(self):
        if torch.cuda.is_available():
            self.skipTest("a GPU is present")
        ok, reason = profiling.available(0)
        self.assertFalse(ok)
        self.assertTrue(reason.startswith("ENOTSUP: "), reason)
        with self.assertRaises(profiling.ProfilerError) as ctx:
            profiling.profile(lambda: None, "sol", 0)
        self.assertEqual(ctx.exception.code, "ENOTSUP")
        with self.assertRaises(profiling.ProfilerError):
            profiling.trace_kernels(lambda: None, 0)
        with self.assertRaises(profiling.ProfilerError) as ctx:
            profiling.profile_any(lambda: None, "sol", 0, problem_path="p.py")
        self.assertEqual(ctx.exception.code, "ENOTSUP")

    def test_missing_library_is_enotsup(self):
        saved = os.environ.get("KAGENT_PROF_LIB")
        os.environ["KAGENT_PROF_LIB"] = "/nonexistent/libkagent_prof.so"
        try:
            self.assertEqual(profiler_lib.library_candidates(), ["/nonexistent/libkagent_prof.so"])
        finally:
            if saved is None:
                del os.environ["KAGENT_PROF_LIB"]
            else:
                os.environ["KAGENT_PROF_LIB"] = saved


class FakeProfLib:
    """A fake libkagent_prof: records kp_* calls, refuses the replay modes in `refuse`, and
    answers kp_profile_end with one range per launch (plus `extra` leading ranges)."""

    path = "fake"

    def __init__(self, n_launches, refuse=(), extra=0):
        self.n, self.refuse, self.extra = n_launches, set(refuse), extra
        self.calls = []
        self.mode = None

    def call(self, name, *args):
        self.calls.append((name, args))
        if name == "kp_profile_begin":
            self.mode = args[2]
            if self.mode in self.refuse:
                raise profiling.ProfilerError("ECUPTI", "fake refuses mode %d" % self.mode)
        if name == "kp_profile_pass_end":
            args[0]._obj.value = 1

    def result(self):
        ranges = [{"range": str(i), "metrics": {"gpu__time_duration.sum": 1000.0 + i}}
                  for i in range(self.n + self.extra)]
        return {"passes": 1, "dropped": 0, "ranges": ranges}


class FakeTorch:
    """Stands in for torch where the replay loop only synchronizes (and a profile asks for the
    device's capability)."""

    class cuda:
        @staticmethod
        def synchronize():
            pass

        @staticmethod
        def get_device_capability(index):
            return (9, 0)


class ReplayModes(unittest.TestCase):
    def test_chain_falls_back_towards_kernel_replay(self):
        self.assertEqual(profiling.replay_chain("user"), ["user", "user-pass", "kernel"])
        self.assertEqual(profiling.replay_chain("user-pass"), ["user-pass", "kernel"])
        self.assertEqual(profiling.replay_chain("kernel"), ["kernel"])
        with self.assertRaises(profiling.ProfilerError):
            profiling.replay_chain("bogus")

    def test_modes_match_the_c_abi(self):
        with open(os.path.join(ROOT, "src/gpu/profiler/include/kagent_prof.h")) as f:
            header = f.read()
        self.assertIn("KP_REPLAY_KERNEL = 0, KP_REPLAY_USER = 1, KP_REPLAY_USER_SWEEP = 2",
                      header)
        self.assertEqual(profiling.REPLAY_MODES, {"kernel": 0, "user-pass": 1, "user": 2})

    def test_user_mode_leaves_the_sweep_to_the_library(self):
        lib = FakeProfLib(3)
        runs = []
        ranges, passes, sessions, first_pass_s = profiling._replay(
            FakeTorch, lib, lambda: runs.append(1), ["gpu__time_duration.sum"], 3, "user", 0, 4)
        begin = [a for n, a in lib.calls if n == "kp_profile_begin"][0]
        self.assertEqual(begin[2], 2)
        self.assertGreaterEqual(begin[1], 2 * 3)  # room for a sweep range before each launch
        self.assertEqual((len(ranges), sessions, len(runs)), (3, 1, 1))
        self.assertGreaterEqual(first_pass_s, 0.0)

    def test_user_pass_mode_sweeps_in_python_and_drops_its_ranges(self):
        class FakeFlush:
            kernels = 2
            calls = 0

            def __call__(self):
                FakeFlush.calls += 1
        saved = profiling._flusher
        profiling._flusher = lambda torch_, dev: FakeFlush()
        try:
            lib = FakeProfLib(3, extra=2)
            ranges, _, _, _ = profiling._replay(FakeTorch, lib, lambda: None,
                                                ["gpu__time_duration.sum"], 3, "user-pass", 0, 4)
        finally:
            profiling._flusher = saved
        self.assertEqual(lib.mode, 1)
        self.assertEqual(FakeFlush.calls, 1)
        self.assertEqual([r["range"] for r in ranges], ["2", "3", "4"])


if __name__ == "__main__":
    unittest.main()
