"""Workers of one device in one pool share their start-up (device_share.py): several real
CPU-mode workers started with --lease by this process (their pool) take the same job at once;
the reference runs in one of them only, the others read its entry, and all reach the same
verdict on the same seeds. The test plays the pool for each worker (test_lease.LeasePool)."""
import os
import shutil
import threading
import unittest

from test_lease import LeasePool
from worker_client import Worker, fixture

WORKERS = 3


class DeviceShareTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.workers = [Worker("cpu", args=["--lease"]) for _ in range(WORKERS)]
        cls.share = cls.workers[0].ready.get("share")

    @classmethod
    def tearDownClass(cls):
        for w in cls.workers:
            w.close()
        if cls.share:
            gone = not os.path.exists(cls.share)
            shutil.rmtree(cls.share, ignore_errors=True)
            assert gone, "the device's last worker leaves no shared folder behind"

    def setUp(self):
        if not self.share:
            self.skipTest("no shared folder: the sandbox does not confine reads and writes here "
                          "(sandbox.missing in the ready line)")

    def jobs_at_once(self, job):
        results = [None] * WORKERS

        def one(k):
            try:
                reply = LeasePool(self.workers[k]).job("benchmark", job)
                results[k] = reply.get("result") or reply
            except Exception as e:  # reported by the assertions below
                results[k] = {"ok": False, "error": "%s: %s" % (type(e).__name__, e)}
        threads = [threading.Thread(target=one, args=(k,)) for k in range(WORKERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
        return results

    def test_workers_of_a_device_share_one_folder_and_their_seeds(self):
        self.assertEqual({w.ready.get("share") for w in self.workers}, {self.share})
        self.assertTrue(os.path.isdir(self.share))
        solo = Worker("cpu")  # a device's only worker shares nothing
        try:
            self.assertIsNone(solo.ready.get("share"))
        finally:
            solo.close()

    def test_the_reference_runs_once_for_all_workers_of_the_device(self):
        job = {"problem": fixture("eval", "matmul_problem.py"),
               "candidate": fixture("eval", "matmul_good.py"),
               "bench": {"budget": 0.05, "baselines": ["eager"]}}
        results = self.jobs_at_once(job)
        for r in results:
            self.assertTrue(r and r["ok"], r and r.get("error"))
        ran = [r for r in results if r["reference_s"] > 0]
        self.assertEqual(len(ran), 1, [r["reference_s"] for r in results])
        # the same seeds, so the same reference trials and the same baseline figures
        self.assertEqual(len({r["replay_seed"] for r in results}), 1)
        eager = [r.get("eager_ms") for r in results]
        self.assertIsNotNone(eager[0])
        self.assertEqual(eager, [eager[0]] * WORKERS, "one baseline figure, measured once")
        # a second round finds everything in each worker's own memory
        again = self.jobs_at_once(job)
        self.assertEqual([r["reference_s"] for r in again], [0.0] * WORKERS)


if __name__ == "__main__":
    unittest.main()
