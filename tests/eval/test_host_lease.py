"""A GPU's lease among pools (lease.HostLock): two workers of different pools, each its device's
only worker (no pool lease to ask), on the same GPU. A timed stage of one waits for the other's
work to end, shared work of both runs at once, a timed stage is not starved by other pools' shared
work that never pauses, and a child forked meanwhile does not keep the lock."""
import fcntl
import multiprocessing
import os
import shutil
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "src", "gpu", "eval"))
from kagent_eval.worker.lease import EXCLUSIVE, SHARED, HostLock, Lease  # noqa: E402

HOLD_S = 0.6


def other_pool(folder, mode, started, done, let_go=None):
    """Another pool's lone worker: holds the GPU's lease in `mode` for HOLD_S, or, given the
    event `let_go`, until it is set (at most 10 s)."""
    lease = Lease(False, None, None, HostLock(folder, "GPU-test"))
    lease.begin(1)
    with lease.held(mode):
        started.set()
        if let_go is None:
            time.sleep(HOLD_S)
        else:
            let_go.wait(10)
        done.set()  # set while it still holds: whoever gets the lease after it sees it set


class HostLeaseTest(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.mkdtemp(prefix="kagent-lease-")
        self.ctx = multiprocessing.get_context("fork")

    def tearDown(self):
        shutil.rmtree(self.folder, ignore_errors=True)

    def waited(self, theirs, mine, let_go=None):
        """Seconds this worker waited for `mine` while the other pool held `theirs`, and whether
        the other's hold had ended by then. With `let_go`, the other holds until it is set, which
        happens once this worker's hold is granted."""
        started, done = self.ctx.Event(), self.ctx.Event()
        p = self.ctx.Process(target=other_pool, args=(self.folder, theirs, started, done, let_go))
        p.start()
        try:
            self.assertTrue(started.wait(10))
            lease = Lease(False, None, None, HostLock(self.folder, "GPU-test"))
            lease.begin(1)
            t = time.monotonic()
            with lease.held(mine):
                waited = time.monotonic() - t
                other_done = done.is_set()
                if let_go is not None:
                    let_go.set()
            return waited, other_done
        finally:
            p.join(10)

    def test_a_timed_stage_waits_for_another_pools_work(self):
        for theirs in (SHARED, EXCLUSIVE):
            waited, other_done = self.waited(theirs, EXCLUSIVE)
            self.assertTrue(other_done, "held exclusive while another pool held it %s" % theirs)
            self.assertGreater(waited, HOLD_S / 2)

    def test_shared_work_waits_only_for_a_timed_stage(self):
        # the other pool holds until this hold is granted: had this hold waited for its release,
        # it would have waited the other's 10 s out and seen `done` set
        waited, other_done = self.waited(SHARED, SHARED, let_go=self.ctx.Event())
        self.assertFalse(other_done)
        self.assertLess(waited, HOLD_S / 2)
        waited, other_done = self.waited(EXCLUSIVE, SHARED)
        self.assertTrue(other_done)

    def test_a_timed_stage_is_not_starved_by_shared_work_that_never_pauses(self):
        """Four pools' workers take turns so that one of them always holds the lease shared (each
        asks again as soon as it lets go): an exclusive request is granted once the holds made
        before it end, and no shared hold overlaps it."""
        stop, holding, overlaps = threading.Event(), [0], []
        count = threading.Lock()

        def shared_pool(delay):
            lock = HostLock(self.folder, "GPU-test")
            time.sleep(delay)
            while not stop.is_set():
                lock.hold(SHARED)
                with count:
                    holding[0] += 1
                time.sleep(HOLD_S / 2)
                with count:
                    holding[0] -= 1
                lock.release()

        threads = [threading.Thread(target=shared_pool, args=(i * HOLD_S / 8,), daemon=True)
                   for i in range(4)]
        for t in threads:
            t.start()
        try:
            time.sleep(HOLD_S)
            with count:
                self.assertGreater(holding[0], 0, "the shared holders do not overlap")
            timed = HostLock(self.folder, "GPU-test")
            t0 = time.monotonic()
            granted = threading.Event()

            def exclusive():
                timed.hold(EXCLUSIVE)
                granted.set()

            threading.Thread(target=exclusive, daemon=True).start()
            self.assertTrue(granted.wait(10 * HOLD_S), "the exclusive request was starved")
            waited = time.monotonic() - t0
            for _ in range(5):
                with count:
                    overlaps.append(holding[0])
                time.sleep(HOLD_S / 10)
            timed.release()
            self.assertLess(waited, 4 * HOLD_S)
            self.assertEqual(overlaps, [0] * 5, "shared holds overlapped the exclusive one")
        finally:
            stop.set()
            for t in threads:
                t.join(5)

    def test_a_held_lock_changes_mode_without_waiting_for_a_queued_request(self):
        """From exclusive to shared, while another pool's exclusive request waits at the
        turnstile for this very hold: no deadlock, and the other is granted after it ends."""
        mine, theirs = HostLock(self.folder, "GPU-test"), HostLock(self.folder, "GPU-test")
        mine.hold(EXCLUSIVE)
        granted = threading.Event()
        waiter = threading.Thread(target=lambda: (theirs.hold(EXCLUSIVE), granted.set()), daemon=True)
        waiter.start()
        time.sleep(HOLD_S / 3)
        done = threading.Event()
        threading.Thread(target=lambda: (mine.hold(SHARED), done.set()), daemon=True).start()
        self.assertTrue(done.wait(5) or granted.is_set(), "the change of mode waited on the turnstile")
        mine.release()
        self.assertTrue(granted.wait(5))
        theirs.release()
        waiter.join(5)

    def test_devices_do_not_wait_for_each_other(self):
        a = HostLock(self.folder, "GPU-a")
        b = HostLock(self.folder, "GPU-b")
        a.hold(EXCLUSIVE)
        # b's hold is granted while a's is still held: were they one lock, it would wait for a
        # release that only comes after the assertion
        granted = threading.Event()
        threading.Thread(target=lambda: (b.hold(EXCLUSIVE), granted.set()), daemon=True).start()
        self.assertTrue(granted.wait(10), "another device's hold waited for this one")
        a.release()
        b.release()

    def test_the_lock_file_is_private_and_closed_on_exec(self):
        lock = HostLock(self.folder, "GPU-test")
        self.assertTrue(fcntl.fcntl(lock.fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC)
        self.assertEqual(os.stat(lock.path).st_mode & 0o777, 0o600)


if __name__ == "__main__":
    unittest.main()
