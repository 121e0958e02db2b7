"""kagent-rt killed outright (kill -9) during a job: its evaluator worker, the candidate's
process and whatever the candidate started end within seconds, not at the stage timeout. A real
kagent-rt (KAGENT_BUILD_DIR) running a CPU-mode pool."""
import os
import signal
import subprocess
import tempfile
import time
import unittest

from worker_client import PYTHON, ROOT, children_of, fixture

BIN = os.path.abspath(os.path.join(os.environ.get("KAGENT_BUILD_DIR", os.path.join(ROOT, "build")),
                                   "kagent-rt"))
SCRIPT = """
local pool = kagent.gpu.pool({ devices = "cpu", python = %r, timeout = 300 })
pool:verify({ problem = %r, candidate = %r, timeout = 300 })
"""


def descendants(pid):
    found, todo = [], [pid]
    while todo:
        kids = children_of(todo.pop())
        found += kids
        todo += kids
    return found


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@unittest.skipUnless(os.path.exists(BIN), "no kagent-rt binary at %s" % BIN)
class ParentDeathTest(unittest.TestCase):
    def test_worker_and_candidate_die_with_kagent_rt(self):
        with tempfile.TemporaryDirectory() as tmp:
            script = os.path.join(tmp, "job.lua")
            with open(script, "w") as f:
                f.write(SCRIPT % (PYTHON, fixture("eval", "relu_problem.py"),
                                  fixture("adversarial", "cpu_infinite_loop.py")))
            rt = subprocess.Popen([BIN, "--env-file", "/dev/null", script], cwd=tmp,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  env=dict(os.environ, KAGENT_PYTHON=PYTHON))
            try:
                # the candidate loops forever in its first trial: wait for the worker's child
                deadline, tree = time.monotonic() + 120, []
                while time.monotonic() < deadline:
                    tree = descendants(rt.pid)
                    if len(tree) >= 2:
                        break
                    time.sleep(0.2)
                self.assertGreaterEqual(len(tree), 2, "the worker and its candidate started")
                time.sleep(1.0)
                tree = descendants(rt.pid)
                os.kill(rt.pid, signal.SIGKILL)
                rt.wait(10)
                deadline = time.monotonic() + 15
                while time.monotonic() < deadline and any(alive(p) for p in tree):
                    time.sleep(0.2)
                left = [p for p in tree if alive(p)]
                self.assertEqual(left, [], "processes of the killed run still alive: %s" % left)
            finally:
                if rt.poll() is None:
                    rt.kill()
                for p in descendants(rt.pid):
                    try:
                        os.kill(p, signal.SIGKILL)
                    except OSError:
                        pass


if __name__ == "__main__":
    unittest.main()
