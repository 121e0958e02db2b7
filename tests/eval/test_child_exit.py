"""A candidate's process left to exit while the worker checks its results (sandbox.collect with
defer_exit): its `exit` time is its own teardown, seen between the checks, not the checks; its CPU
time is taken when it is reaped."""
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "src", "gpu", "eval"))
from kagent_eval.sandbox import sandbox  # noqa: E402


def exiting_child(after_s, burn_cpu_s=0.0):
    pid = os.fork()
    if pid == 0:
        start = time.process_time()
        while time.process_time() - start < burn_cpu_s:
            pass
        time.sleep(after_s)
        os._exit(0)
    sandbox.LIVE.add(pid)
    out = sandbox.Outcome()
    out.pending_exit = (pid, time.monotonic())
    return out


class ChildExitTest(unittest.TestCase):
    def test_a_child_gone_before_the_checks_end_is_timed_to_its_end(self):
        out = exiting_child(0.0)
        deadline = time.monotonic() + 5
        while out.exited_at is None and time.monotonic() < deadline:
            time.sleep(0.02)  # the worker's checks, looking between them
            sandbox.note_exit(out)
        self.assertIsNotNone(out.exited_at)
        self.assertIsNotNone(out.pending_exit)  # seen, not reaped: finish_exit still reaps it
        time.sleep(1.5)  # more checks after it was gone
        sandbox.finish_exit(out)
        self.assertLess(out.exit_s, 1.0)  # not the 1.5 s of checks after it
        self.assertIsNone(out.pending_exit)

    def test_a_child_still_running_at_the_end_is_timed_to_its_reaping(self):
        out = exiting_child(0.4)
        sandbox.note_exit(out)
        self.assertIsNone(out.exited_at)
        sandbox.finish_exit(out)
        self.assertGreaterEqual(out.exit_s, 0.35)
        sandbox.finish_exit(out)  # twice is safe

    def test_the_cpu_time_of_the_reaped_process_is_its_own(self):
        busy, idle = exiting_child(0.0, burn_cpu_s=0.3), exiting_child(0.3)
        sandbox.finish_exit(busy)
        sandbox.finish_exit(idle)
        self.assertGreaterEqual(busy.cpu_s, 0.3)
        self.assertLess(idle.cpu_s, 0.2)  # it slept: the time it took is not CPU


if __name__ == "__main__":
    unittest.main()
