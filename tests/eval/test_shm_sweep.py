"""shm_sweep: what the worker removes from the machine's /dev/shm after a job without a mount
namespace: new files of the job's user that no live process holds; never what was there before
the job, nor a file another process holds open or mapped."""
import mmap
import os
import secrets
import unittest

from kagent_eval.sandbox import shm_sweep


class ShmSweepTest(unittest.TestCase):
    def setUp(self):
        if not os.path.isdir(shm_sweep.SHM) or not os.access(shm_sweep.SHM, os.W_OK):
            self.skipTest("no writable /dev/shm here")
        self.tag = "kagent-sweep-test-%s-" % secrets.token_hex(4)
        self.paths = []

    def tearDown(self):
        for p in self.paths:
            if os.path.exists(p):
                os.unlink(p)

    def make(self, name, size=4096):
        path = os.path.join(shm_sweep.SHM, self.tag + name)
        with open(path, "wb") as f:
            f.write(b"\0" * size)
        self.paths.append(path)
        return path

    def test_removes_leftovers_and_keeps_the_rest(self):
        before_job = self.make("before")
        since, before = shm_sweep.snapshot()
        left = self.make("left", 1 << 20)
        held = open(self.make("held"), "rb")
        mapped_path = self.make("mapped")
        with open(mapped_path, "r+b") as f:
            mapped = mmap.mmap(f.fileno(), 4096)
        try:
            removed = dict(shm_sweep.sweep(since, before))
        finally:
            held.close()
            mapped.close()
        mine = {n[len(self.tag):]: size for n, size in removed.items() if n.startswith(self.tag)}
        self.assertEqual(mine, {"left": 1 << 20})
        self.assertFalse(os.path.exists(left))
        for p in (before_job, held.name, mapped_path):
            self.assertTrue(os.path.exists(p), p)


if __name__ == "__main__":
    unittest.main()
