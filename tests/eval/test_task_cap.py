"""A job's namespace caps its tasks where the kernel keeps pid_max per PID namespace (Linux
6.14 and later): past the cap fork fails, whatever the job does (namespaces.task_cap). Root only
(the worker's jobs as root are what no RLIMIT_NPROC holds), skipped elsewhere."""
import os
import signal
import unittest

from kagent_eval.sandbox import namespaces


class TaskCapTest(unittest.TestCase):
    def test_release_parsing(self):
        self.assertTrue(namespaces.pid_max_applies("6.14.0"))
        self.assertTrue(namespaces.pid_max_applies("6.18.44-fc-v669"))
        self.assertFalse(namespaces.pid_max_applies("6.13.12"))
        self.assertFalse(namespaces.pid_max_applies("5.15.0-91-generic"))

    def test_a_job_cannot_run_more_tasks_than_its_cap(self):
        if os.geteuid() != 0 or not namespaces.pid_max_applies():
            self.skipTest("needs root and Linux >= 6.14")
        kind, why = namespaces.probe()
        if kind != "root":
            self.skipTest("no namespaces for root here: %s" % why)
        allowance = 20
        cap = namespaces.task_cap(allowance)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the job
            os.close(r)
            started = 0
            try:
                namespaces.enter(user=False, max_tasks=allowance)
                kids = []
                for _ in range(cap + 100):
                    try:
                        k = os.fork()
                    except OSError:
                        break
                    if k == 0:
                        signal.pause()
                        os._exit(0)
                    kids.append(k)
                started = len(kids)
                for k in kids:
                    os.kill(k, signal.SIGKILL)
            finally:
                os.write(w, str(started).encode())
                os._exit(0)
        os.close(w)
        started = int(os.read(r, 64) or b"-1")
        os.close(r)
        os.waitpid(pid, 0)
        # the job's first process holds one task of the cap
        self.assertGreater(started, allowance)
        self.assertLessEqual(started, cap - 1)


if __name__ == "__main__":
    unittest.main()
