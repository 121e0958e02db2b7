"""The host's CPU pressure over a stretch of a job (host_load.py), read from a PSI file."""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "src", "gpu", "eval"))
from kagent_eval.worker import host_load, noise  # noqa: E402

LINES = "some avg10=0.00 avg60=0.00 avg300=0.00 total=%d\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"


class FakeClock:
    """A wall clock the test moves by hand: a stall share must not hang on how long a sleep
    took on a busy machine."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


class HostLoadTest(unittest.TestCase):
    def setUp(self):
        self.clock = FakeClock()
        fd, self.path = tempfile.mkstemp(prefix="kagent-psi-")
        os.close(fd)
        self.write(1000000)

    def tearDown(self):
        os.unlink(self.path)

    def write(self, total_us):
        with open(self.path, "w") as f:
            f.write(LINES % total_us)

    def test_a_stall_of_most_of_the_stretch_is_loaded(self):
        w = host_load.Window(self.path, clock=self.clock)
        self.clock.now += 0.2
        self.write(1000000 + 190000)  # some task waited 0.19 s of 0.2 s
        self.assertGreater(w.share(), 0.5)
        self.assertTrue(w.loaded())

    def test_a_quiet_host_is_not(self):
        w = host_load.Window(self.path, clock=self.clock)
        self.clock.now += 0.2
        self.write(1000000 + 2000)
        self.assertLess(w.share(), host_load.LOADED_SHARE)
        self.assertFalse(w.loaded())

    def test_a_steady_control_on_a_loaded_host_says_the_machine_was_noisy(self):
        # the control's figure alone passes every rule; the host's CPUs taken while it ran make
        # the noise the machine's (re-measured after a wait, "not measured" if it stays), so an
        # honest kernel's disagreeing re-measures are never refused for it
        steady = {"median": 0.0015, "p10": 0.0014, "p90": 0.0016, "spread": 1.14, "n": 400}
        w = host_load.Window(self.path, clock=self.clock)
        self.clock.now += 0.2
        self.write(1000000 + 190000)
        self.assertTrue(noise.control_noisy(steady, steady, None, False, w.loaded()))
        quiet = host_load.Window(self.path, clock=self.clock)
        self.clock.now += 0.2
        self.write(1000000 + 190000 + 2000)
        self.assertFalse(noise.control_noisy(steady, steady, None, False, quiet.loaded()),
                         "a steady control on a quiet host leaves the noise to the kernel")

    def test_without_pressure_figures_nothing_is_assumed(self):
        w = host_load.Window(self.path + ".absent")
        self.assertIsNone(w.share())
        self.assertFalse(w.loaded())  # the clock bound then stands as it is (ETAMPER)

    def test_this_hosts_file_reads_when_present(self):
        if not os.path.exists(host_load.PRESSURE_FILE):
            self.skipTest("no PSI on this kernel")
        share = host_load.Window().share()
        self.assertTrue(share is None or 0.0 <= share <= 1.0)


if __name__ == "__main__":
    unittest.main()
