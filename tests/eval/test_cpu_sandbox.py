"""The candidate sandbox, tried by hostile candidates against a real CPU-mode worker
(tests/fixtures/adversarial/cpu_*): fake API keys are planted in the worker's own environment, and
none may reach a result or the worker's log; no process a job started outlives it; a candidate over
the memory limit is stopped and the next job runs; writes outside the job folder, reads of private
files and network connections fail. A check whose mechanism the kernel lacks is skipped, naming
it (the worker's ready line says what it has)."""
import glob
import json
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
import unittest

from worker_client import PYTHON, ROOT, Worker, children_of, fixture, fixture_text, processes_with

MEMORY_MB = 1024
FAKE_KEYS = {name: "fake-%s-%s" % (name.lower(), secrets.token_hex(16)) for name in (
    "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "KAGENT_LLM_KEY", "SERVICE_AUTH_TOKEN")}


class SandboxTest(unittest.TestCase):
    ENV = {}  # the worker's settings

    @classmethod
    def setUpClass(cls):
        fd, cls.log = tempfile.mkstemp(prefix="kagent-sandbox-test-", suffix=".log")
        os.close(fd)
        cls.w = Worker("cpu", env=dict(FAKE_KEYS, KAGENT_EVAL_MEMORY_MB=str(MEMORY_MB), **cls.ENV),
                       log=cls.log)
        cls.status = cls.w.ready["sandbox"]

    @classmethod
    def tearDownClass(cls):
        cls.w.close()
        os.unlink(cls.log)

    def require(self, key, value):
        if self.status.get(key) != value:
            self.skipTest("the worker has %s=%r here (%s)" % (
                key, self.status.get(key), "; ".join(self.status["missing"]) or "no reason given"))

    def job(self, text, op="verify", problem="relu_problem.py"):
        r = self.w.job(op, problem, text)
        # nothing the job started is left: the worker's one child is the spare for the next job
        self.assertLessEqual(len(children_of(self.w.proc.pid)), 1, "a job's process outlived it")
        jobs = glob.glob(os.path.join(self.status["root"], "job-%d-*" % self.w.proc.pid))
        self.assertLessEqual(len(jobs), 1, "job folders left behind: %s" % jobs)
        return r

    def assert_no_secret(self, result):
        with open(self.log) as f:
            texts = {"result": json.dumps(result), "worker log": f.read()}
        for where, text in texts.items():
            for name, value in FAKE_KEYS.items():
                self.assertNotIn(value, text, "%s leaked into the %s" % (name, where))

    def test_environment_is_the_allow_list(self):
        r = self.job(fixture_text("adversarial", "cpu_env_leak.py"))
        self.assertEqual(r["code"], "ELOAD", r)
        self.assertIn("PATH=", r["error"], "the candidate did print its environment")
        self.assertIn("HOME=%s/job-" % self.status["root"], r["error"], "HOME is the job folder")
        self.assert_no_secret(r)

    def test_ancestors_environment_is_unreadable(self):
        pids = [self.w.proc.pid, os.getpid()]
        r = self.job(fixture_text("adversarial", "cpu_parent_environ.py", PIDS=",".join(map(str, pids))))
        self.assertEqual(r["code"], "ELOAD", r)
        reads = [line.split(":")[0] for line in r["error"].splitlines() if " READ" in line]
        if self.status["processes"].startswith("namespace"):
            for pid in pids:
                self.assertRegex(r["error"], r"pid %d refused: .*No such file" % pid)
            self.assertEqual(reads, ["pid 1 READ (itself)"])
        else:  # the worker is not dumpable; this test's process is, and holds no key
            self.assertRegex(r["error"], r"pid %d refused: .*Permission denied" % self.w.proc.pid)
        self.assert_no_secret(r)

    def test_a_setsid_daemon_dies_with_its_job(self):
        token = "kagent-escape-" + secrets.token_hex(8)
        r = self.job(fixture_text("adversarial", "cpu_setsid_escape.py", TOKEN=token))
        self.assertTrue(r["ok"], r)
        self.assertEqual(processes_with(token), [], "the daemon outlived its job")

    def test_over_the_memory_limit_is_stopped_and_the_pool_goes_on(self):
        self.require("memory_mb", MEMORY_MB)
        r = self.job(fixture_text("adversarial", "cpu_memory_hog.py"))
        self.assertEqual(r["code"], "EMEMORY", r)
        self.assertIn("memory limit of %d MB" % MEMORY_MB, r["error"])
        self.assertTrue(self.job(fixture("eval", "relu_good.py"))["ok"])

    def test_writes_outside_the_job_folder_fail(self):
        self.require("writes", "landlock")
        token = secrets.token_hex(8)
        r = self.job(fixture_text("adversarial", "cpu_write_outside.py", TOKEN=token))
        self.assertEqual(r["code"], "ELOAD", r)
        self.assertIn("PermissionError: blocked: ", r["error"])
        # Landlock refuses each; in a mount namespace the home and temp folders are covered by
        # a read-only empty folder first (job_view.SOCKET_FOLDERS)
        self.assertEqual(r["error"].count("Permission denied")
                         + r["error"].count("Read-only file system"), 3, r["error"])
        self.assertEqual(processes_with(token), [])
        for path in [os.path.expanduser("~"), "/tmp"]:
            self.assertFalse(os.path.exists(os.path.join(path, "kagent_sandbox_probe_" + token)))

    def test_what_cuda_and_triton_need_is_allowed(self):
        """The writes CUDA's start and Triton's cache make pass the sandbox (on the GPU machine
        without them cuInit fails with error 304 and Triton's compile with EXDEV); writing a
        sysctl stays denied."""
        self.require("writes", "landlock")
        r = self.job(fixture_text("adversarial", "cpu_sandbox_allowances.py"))
        self.assertEqual(r["code"], "ELOAD", r)
        tries = dict(kv.split(": ", 1) for kv in r["error"].split("ALLOWANCES ", 1)[1].split("; "))
        # root without namespaces may write its own /proc entries only (jail.proc_writes)
        child = "ok" if self.status["processes"] != "subreaper" or os.geteuid() != 0 else "Permission denied"
        self.assertEqual(tries, {"thread comm": "ok", "child comm": child, "move": "ok",
                                 "cache move": "ok", "sysctl": "denied"}, r["error"])

    def test_private_files_are_unreadable(self):
        self.require("reads", "landlock")
        folder = tempfile.mkdtemp(prefix="kagent-sandbox-test-")
        try:
            path = os.path.join(folder, ".env")
            with open(path, "w") as f:
                f.write("OPENAI_API_KEY=%s\n" % FAKE_KEYS["OPENAI_API_KEY"])
            r = self.job(fixture_text("adversarial", "cpu_read_secret_file.py", PATH=path))
        finally:
            shutil.rmtree(folder)
        self.assertEqual(r["code"], "ELOAD", r)
        # Landlock refuses it; in a mount namespace the temp folder holding it is covered first
        self.assertRegex(r["error"], "Permission denied|No such file or directory")
        self.assert_no_secret(r)

    def test_dev_shm_is_the_jobs_own_and_bounded(self):
        if not self.status["processes"].startswith("namespace"):
            self.skipTest("no namespaces here: a job's /dev/shm is the machine's (%s)" % (
                "; ".join(self.status["missing"]) or "KAGENT_EVAL_NAMESPACES=0"))
        name = "kagent-shm-test-%s" % secrets.token_hex(6)
        big = MEMORY_MB + 256  # more than the job's memory limit
        try:
            r = self.job(fixture_text("adversarial", "cpu_shm_leftover.py", NAME=name, BIG_MB=big))
            # the write past the limit never gets there: the tmpfs is full (ENOSPC), or, where the
            # job has a memory cgroup (which counts /dev/shm), the kernel stops the job first
            if r["code"] == "EMEMORY":
                self.assertEqual(self.status["memory_counts"], "all (cgroup)", r)
            else:
                self.assertEqual(r["code"], "ERUN", r)
                self.assertRegex(r["error"], r"wrote \d+ MiB to /dev/shm, then No space left on device")
                written = int(r["error"].split("wrote ")[1].split(" MiB")[0])
                self.assertLess(written, big)
            # nothing the job wrote there outlives it on the machine's /dev/shm
            self.assertEqual(glob.glob("/dev/shm/%s*" % name), [])
        finally:
            for path in glob.glob("/dev/shm/%s*" % name):
                os.unlink(path)

    def test_dev_shm_leftovers_are_swept_without_namespaces(self):
        """Without a mount namespace the job's /dev/shm is the machine's: what it leaves there is
        removed once the job is over (which files: test_shm_sweep.py)."""
        if self.status["processes"].startswith("namespace"):
            self.skipTest("namespaces here: the job's /dev/shm is its own (the test above)")
        name = "kagent-shm-test-%s" % secrets.token_hex(6)
        try:
            r = self.job(fixture_text("adversarial", "cpu_shm_leftover.py", NAME=name, BIG_MB=1))
            self.assertEqual(r["code"], "ERUN", r)
            self.assertIn("wrote 1 MiB to /dev/shm", r["error"])
            self.assertEqual(glob.glob("/dev/shm/%s*" % name), [])
        finally:
            for path in glob.glob("/dev/shm/%s*" % name):
                os.unlink(path)

    def test_password_hashes_are_hidden_from_a_root_candidate(self):
        if os.geteuid() != 0:
            self.skipTest("only root can read /etc/shadow at all")
        self.require("processes", "namespace (root)")
        r = self.job(fixture_text("adversarial", "cpu_read_shadow.py"))
        # the read rule refuses it; where a read gets through, the mount namespace shows it empty
        self.assertRegex(r.get("error") or "", r"REPORT (read=0|refused)", r)

    def test_no_network(self):
        if self.status["network"] == "open":
            self.skipTest("no network confinement here: %s" % "; ".join(self.status["missing"]))
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(1)
            listener.settimeout(0.5)
            r = self.job(fixture_text("adversarial", "cpu_network.py", PORT=listener.getsockname()[1]))
            self.assertEqual(r["code"], "ELOAD", r)
            # its own loopback refuses (a network namespace) or no socket at all (the filter)
            self.assertRegex(r["error"], "Connection refused" if self.status["network"] == "namespace"
                             else "Network is unreachable")
            with self.assertRaises(socket.timeout):
                listener.accept()


class SandboxWithoutNamespacesTest(SandboxTest):
    """The same candidates where a machine gives no namespaces: the worker's subreaper, the
    system call filter and the worker not being dumpable take their place."""
    ENV = {"KAGENT_EVAL_NAMESPACES": "0"}

    def test_the_fallbacks_are_in_place(self):
        self.assertEqual(self.status["processes"], "subreaper")
        self.assertEqual(self.status["network"], "seccomp")


class SettingsTest(unittest.TestCase):
    def test_a_bad_memory_limit_is_named(self):
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src", "gpu", "eval"),
                   KAGENT_EVAL_MEMORY_MB="lots")
        p = subprocess.run([PYTHON, "-m", "kagent_eval.worker", "--device", "cpu"], env=env,
                           input="", capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 2)
        self.assertIn("KAGENT_EVAL_MEMORY_MB must be a whole number of MB, not 'lots'", p.stderr)


    def test_a_required_layer_the_machine_lacks_stops_the_worker(self):
        """KAGENT_EVAL_REQUIRE fails closed: without namespaces a candidate could connect to the
        machine's sockets by path, so a worker required to hide them does not start."""
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src", "gpu", "eval"),
                   KAGENT_EVAL_NAMESPACES="0", KAGENT_EVAL_REQUIRE="socket_paths")
        p = subprocess.run([PYTHON, "-m", "kagent_eval.worker", "--device", "cpu"], env=env,
                           input="", capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("KAGENT_EVAL_REQUIRE: this machine does not give socket_paths=open", p.stderr)
        env["KAGENT_EVAL_REQUIRE"] = "sockets"
        p = subprocess.run([PYTHON, "-m", "kagent_eval.worker", "--device", "cpu"], env=env,
                           input="", capture_output=True, text=True, timeout=120)
        self.assertIn("KAGENT_EVAL_REQUIRE: unknown layer sockets", p.stderr)


class ProcGuardTest(unittest.TestCase):
    def test_a_proc_that_cannot_be_guarded_is_named_and_narrows_writes(self):
        """Where the job's /proc cannot be made read-only, a root child writes only its own
        entries, and the worker's status says what that costs."""
        from kagent_eval.sandbox import jail, namespaces
        if os.geteuid() != 0 or namespaces.probe()[0] is None:
            self.skipTest("needs root with namespaces")
        guard = namespaces._guard_proc
        namespaces._guard_proc = lambda: False
        try:
            status = jail.setup({})
        finally:
            namespaces._guard_proc = guard
        self.assertTrue(any("/proc could not be made read-only" in m and "cannot start CUDA" in m
                            for m in status["missing"]), status["missing"])
        self.assertEqual(jail.proc_writes(), "/proc/self")  # namespaces.proc_guarded unset here


class HiddenSocketFoldersTest(unittest.TestCase):
    def test_a_covered_folder_hides_its_sockets_but_the_kept_ones(self):
        """What the mount namespace does to /run (job_view.SOCKET_FOLDERS, with KEPT_PATHS such as
        /run/nvidia-persistenced bound back), on a folder of the test's own: a socket there is
        unreachable by path from the job, one in the kept folder answers."""
        from kagent_eval.sandbox import namespaces
        kind = namespaces.probe()[0]
        if kind is None:
            self.skipTest("no namespaces here")
        top = tempfile.mkdtemp(prefix="kagent-hide-test-")
        os.makedirs(os.path.join(top, "keep"))
        socks = []
        try:
            for rel in ("host.sock", "keep/daemon.sock"):
                s = socket.socket(socket.AF_UNIX)
                s.bind(os.path.join(top, rel))
                s.listen(1)
                socks.append(s)
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    namespaces.enter(user=kind == "user", hidden=(top,), kept=(os.path.join(top, "keep"),))
                    code = 0 if sorted(os.listdir(top)) == ["keep"] else 3
                    for rel, ok in (("host.sock", False), ("keep/daemon.sock", True)):
                        with socket.socket(socket.AF_UNIX) as c:
                            try:
                                c.connect(os.path.join(top, rel))
                                code = code if ok else 4
                            except OSError:
                                code = code if not ok else 5
                finally:
                    os._exit(code)
            _, status = os.waitpid(pid, 0)
            self.assertEqual(os.WEXITSTATUS(status), 0, "3: listing, 4: hidden socket reached, "
                             "5: kept socket unreachable")
        finally:
            for s in socks:
                s.close()
            shutil.rmtree(top)


class SecondUserTest(unittest.TestCase):
    """Two OS users evaluate at once, each in their own sandbox folder."""

    def setUp(self):
        if os.geteuid() != 0 or not shutil.which("useradd"):
            self.skipTest("needs root and useradd to create a second user")
        self.user = "kagent-sbx-%s" % secrets.token_hex(3)
        subprocess.run(["useradd", "--no-create-home", "--home-dir", "/nonexistent",
                        "--shell", "/usr/sbin/nologin", self.user], check=True)
        self.addCleanup(subprocess.run, ["userdel", self.user], check=False)

    def test_two_users_at_once(self):
        workers = [Worker("cpu", threads=1), Worker("cpu", threads=1, user=self.user)]
        roots = [w.ready["sandbox"]["root"] for w in workers]
        self.addCleanup(shutil.rmtree, roots[1], True)
        results = [None, None]

        def run(i):
            results[i] = workers[i].job("benchmark", "matmul_problem.py", fixture("eval", "matmul_good.py"),
                                        bench={"budget": 0.1, "min_reps": 5})
        threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            for w in workers:
                w.close()
        self.assertNotEqual(roots[0], roots[1])
        st = os.stat(roots[1])
        self.assertEqual((st.st_uid, st.st_mode & 0o777), (pwd.getpwnam(self.user).pw_uid, 0o700))
        for r in results:
            self.assertTrue(r and r["ok"], r)


if __name__ == "__main__":
    unittest.main()
