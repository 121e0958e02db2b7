"""Hostile candidates (hostile_cases.py) against a real CPU-mode worker, as the worker's user
runs it: root with namespaces, root without them (KAGENT_EVAL_NAMESPACES=0), and, where this
test runs as root, an ordinary user with and without namespaces (a user the test makes). Each
case must reach nothing, and an honest candidate that starts a few processes and threads still
passes. A case whose layer the worker reports missing is skipped, naming the reason."""
import os
import pwd
import secrets
import shutil
import subprocess
import unittest

import hostile_cases
from hostile_cases import MEMORY_MB
from worker_client import Worker, children_of

HONEST = """
import subprocess, threading
import torch
import torch.nn as nn

# what an honest kernel's start does: a few compiler processes, a pool of threads
for _ in range(8):
    subprocess.run(["true"], check=True)
threads = [threading.Thread(target=lambda: torch.ones(64).sum()) for _ in range(16)]
for t in threads:
    t.start()
for t in threads:
    t.join()


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.clamp(x, min=0.0)
"""


class HostileTest(unittest.TestCase):
    ENV = {}
    USER = False  # run the worker as an ordinary user made for the test

    @classmethod
    def setUpClass(cls):
        cls.user = None
        if cls.USER:
            if os.geteuid() != 0 or not shutil.which("useradd"):
                raise unittest.SkipTest("needs root and useradd to run a worker as another user")
            cls.user = "kagent-hst-%s" % secrets.token_hex(3)
            subprocess.run(["useradd", "--no-create-home", "--home-dir", "/nonexistent",
                            "--shell", "/usr/sbin/nologin", cls.user], check=True)
        cls.uid = pwd.getpwnam(cls.user).pw_uid if cls.user else os.getuid()
        cls.w = Worker("cpu", env=dict(KAGENT_EVAL_MEMORY_MB=str(MEMORY_MB), **cls.ENV), user=cls.user)
        cls.status = cls.w.ready["sandbox"]

    @classmethod
    def tearDownClass(cls):
        cls.w.close()
        if cls.user:
            shutil.rmtree(cls.status["root"], ignore_errors=True)
            subprocess.run(["userdel", cls.user], check=False)

    def attack(self, case_class):
        lacking = hostile_cases.unavailable(case_class)
        if lacking:
            self.skipTest("%s (scripts/setup.sh --tests installs it)" % lacking)
        if not hostile_cases.applicable(case_class, self.uid):
            self.skipTest("meaningful only for a worker run by root")
        why = case_class.layer(self.status)
        if why:
            self.skipTest(why)
        case = case_class(self.uid, self.status)
        result, reached = case.run(self.w)
        self.assertEqual(reached, "", "%s reached: %s (result %s)" % (case.name, reached, result))
        self.assertFalse(result.get("ok"), result)
        self.assertLessEqual(len(children_of(self.w.proc.pid)), 1, "a job's process outlived it")
        return result

    def test_fork_bomb(self):
        r = self.attack(hostile_cases.ForkBomb)
        if self.status["process_limit"] == "cgroup":  # its counter sees every refused fork
            self.assertEqual(r["code"], "EPROCESSES", r)
            self.assertIn("KAGENT_EVAL_MAX_PROCESSES", r["error"])

    def test_many_children(self):
        r = self.attack(hostile_cases.ManyChildren)
        self.assertIn("KAGENT_EVAL_MAX_PROCESSES", r["error"])

    def test_shm_hog(self):
        self.attack(hostile_cases.ShmHog)

    def test_shared_mmap_hog(self):
        r = self.attack(hostile_cases.SharedMmapHog)
        self.assertIn("memory limit of %d MB" % MEMORY_MB, r["error"])

    def test_unix_socket_by_path(self):
        self.attack(hostile_cases.UnixSocketByPath)

    def test_tmux_server_in_the_temp_folder(self):
        self.attack(hostile_cases.TmuxServer)

    def test_tmux_server_in_a_home_folder(self):
        self.attack(hostile_cases.TmuxServerInHome)

    def test_ssh_agent_in_the_temp_folder(self):
        self.attack(hostile_cases.SshAgent)

    def test_ssh_agent_in_a_home_folder(self):
        self.attack(hostile_cases.SshAgentInHome)

    def test_abstract_unix_socket(self):
        self.attack(hostile_cases.AbstractUnixSocket)

    def test_signal_other_process(self):
        self.attack(hostile_cases.SignalOtherProcess)

    def test_read_shadow(self):
        self.attack(hostile_cases.ReadShadow)

    def test_write_outside(self):
        self.attack(hostile_cases.WriteOutside)

    def test_inherited_descriptors(self):
        self.attack(hostile_cases.InheritedDescriptors)

    def test_endless_fork_bomb(self):
        r = self.attack(hostile_cases.EndlessForkBomb)
        self.assertEqual(r["code"], "EPROCESSES", r)

    def test_honest_processes_and_threads_pass(self):
        r = self.w.job("verify", "relu_problem.py", HONEST)
        self.assertTrue(r["ok"], r)


class HostileWithoutNamespacesTest(HostileTest):
    ENV = {"KAGENT_EVAL_NAMESPACES": "0"}


class HostileWithoutCgroupsTest(HostileTest):
    """Root where no cgroup is delegated (a container whose own group holds processes): in the
    job's PID namespace the worker counts and stops what the job runs (process_watch.py)."""
    ENV = {"KAGENT_EVAL_CGROUPS": "0"}

    def test_the_worker_watches_the_jobs_tasks_where_it_is_root_in_a_namespace(self):
        if os.geteuid() != 0 or not self.status["processes"].startswith("namespace"):
            self.skipTest("the watch is root's in a job namespace; here: %s" % self.status["missing"])
        self.assertEqual(self.status["process_limit"], "watch", self.status["missing"])
        r = self.attack(hostile_cases.ForkBomb)
        self.assertEqual(r["code"], "EPROCESSES", r)


class HostileAsUserTest(HostileTest):
    USER = True

    def test_user_namespaces_where_the_kernel_allows_them(self):
        """The worker (not dumpable) gives its ordinary user's children the user namespaces
        that user can make (unshare(1) as that user is the witness)."""
        if not shutil.which("unshare"):
            self.skipTest("no unshare(1) to check what this kernel allows")
        p = subprocess.run(["unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount",
                            "--net", "true"], user=self.user, capture_output=True, timeout=60)
        if p.returncode != 0:
            self.skipTest("user namespaces refused here: %s" % p.stderr.decode().strip())
        self.assertEqual(self.status["processes"], "namespace (user)", self.status["missing"])


class HostileAsUserWithoutNamespacesTest(HostileTest):
    USER = True
    ENV = {"KAGENT_EVAL_NAMESPACES": "0"}


if __name__ == "__main__":
    unittest.main()
