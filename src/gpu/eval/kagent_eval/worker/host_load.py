"""How busy the host's CPUs were over a stretch of a job, from the kernel's CPU pressure
(PSI, /proc/pressure/cpu: the share of time some runnable task waited for a CPU). The worker's
clock bound on the timed calls (timed_verdict.apply_benchmark, ETAMPER) assumes a candidate's
process gets a CPU when it asks: on a host whose CPUs are oversubscribed (many compiles beside
the job) each call's launch waits its turn, and an honest kernel's calls take many times their
GPU time by that clock. Where the host was that busy, an over-long loop is a figure the clock
cannot check (trust.py `clock_unchecked`: re-measured, refused if it stays so), not a proof of
tampering. The figure is never accepted on this account: it only changes which refusal, or
which re-measure, a job gets. A candidate that loads the CPUs itself is refused all the same."""
import time

PRESSURE_FILE = "/proc/pressure/cpu"
# share of the stretch during which some task waited for a CPU above which the host counts as
# oversubscribed. An idle or lightly used host stays under a few percent; a host running a
# dozen TorchInductor compiles beside the job sits near 100%
LOADED_SHARE = 0.25


def _some_total_us(path=PRESSURE_FILE):
    """The `some` line's cumulative stall time in microseconds, or None where PSI is absent
    (kernel without it, psi=0, a container that hides it)."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("some "):
                    for part in line.split():
                        if part.startswith("total="):
                            return int(part[6:])
    except (OSError, ValueError):
        return None
    return None


class Window:
    """A stretch of time from its creation: share() is the host's CPU stall share over it."""

    def __init__(self, path=PRESSURE_FILE, clock=time.monotonic):
        # clock: the wall clock the share is taken over (a test gives its own, so that a stall
        # share does not depend on how long a sleep took on a busy machine)
        self.path, self.clock = path, clock
        self.t0, self.stall0 = clock(), _some_total_us(path)

    def share(self):
        """Stall share in [0, 1] since the window began, or None where PSI cannot be read."""
        stall = _some_total_us(self.path)
        wall = self.clock() - self.t0
        if stall is None or self.stall0 is None or wall <= 0:
            return None
        return max(0.0, min(1.0, (stall - self.stall0) / 1e6 / wall))

    def loaded(self):
        """True where the host's CPUs were oversubscribed over the window (unknown counts as
        not: without PSI the clock bound stands as it is)."""
        s = self.share()
        return s is not None and s >= LOADED_SHARE
