"""What a job's mount namespace shows (job_view.py, README.md "Sandbox"): the temp and home
folders are covered, and only what the job needs is bound back, so an honest job whose problem and
kernel files live in /tmp or a home folder (a user's problems live under their home), or that
reads a folder under a home (KAGENT_EVAL_READ_PATHS, like a Python installed under ~/.pyenv),
still verifies, by a prepared spare (its files copied into its folder: job_view.View.staged) and
by a child forked for the job (its files bound back). A socket beside a file that is bound back
stays out of reach: only the file is. The worker's ready line says what is covered, and without
namespaces says plainly that named sockets are reachable. Run by a real CPU-mode worker."""
import os
import pwd
import shutil
import socket
import tempfile
import unittest

from worker_client import Worker, fixture, fixture_text

HELPER = "def clamp_min():\n    return 0.0\n"
PROBLEM_USING_HELPER = """
import sys
sys.path.insert(0, "@LIB@")
import kagent_view_helper  # a module in a folder under a home, named by KAGENT_EVAL_READ_PATHS
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.clamp(x, min=kagent_view_helper.clamp_min())


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return []
"""


def home_folder():
    """The home folder of the user running the tests, else /home (where homes live)."""
    home = pwd.getpwuid(os.getuid()).pw_dir
    return home if os.path.isdir(home) and os.access(home, os.W_OK) else "/home"


def copy_into(folder, name, text):
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        f.write(text)
    return path


class JobFilesUnderCoveredFoldersTest(unittest.TestCase):
    ENV = {}  # with the spare (the default): the job's files are staged into its folder

    @classmethod
    def setUpClass(cls):
        cls.folders = []
        for base in ("/tmp", home_folder()):
            if not os.access(base, os.W_OK):
                continue
            cls.folders.append(tempfile.mkdtemp(prefix="kagent-view-test-", dir=base))
        cls.lib = os.path.join(cls.folders[-1], "lib")
        os.mkdir(cls.lib)
        copy_into(cls.lib, "kagent_view_helper.py", HELPER)
        cls.w = Worker("cpu", env=dict(KAGENT_EVAL_READ_PATHS=cls.lib, **cls.ENV))
        cls.status = cls.w.ready["sandbox"]

    @classmethod
    def tearDownClass(cls):
        cls.w.close()
        for folder in cls.folders:
            shutil.rmtree(folder, ignore_errors=True)

    def verify(self, problem, candidate):
        reply = self.w.request("verify", {"problem": problem, "candidate": candidate})
        self.assertTrue(reply["ok"], reply)
        return reply["result"]

    def test_problem_and_kernel_files_in_temp_and_home_folders_verify(self):
        with open(fixture("eval", "relu_problem.py")) as f:
            problem = f.read()
        with open(fixture("eval", "relu_good.py")) as f:
            kernel = f.read()
        for folder in self.folders:
            with self.subTest(folder=folder):
                r = self.verify(copy_into(folder, "problem.py", problem),
                                copy_into(folder, "kernel.py", kernel))
                self.assertTrue(r["ok"], r)

    def test_files_reached_through_a_link_in_a_covered_folder_verify(self):
        # /tmp/<folder>/link -> the fixtures' folder: the job opens the files at the link's path,
        # which the view must show as well as the real one (a clone beside a linked shared/)
        link = os.path.join(self.folders[0], "link")
        os.symlink(os.path.dirname(fixture("eval", "relu_problem.py")), link)
        try:
            r = self.verify(os.path.join(link, "relu_problem.py"), os.path.join(link, "relu_good.py"))
            self.assertTrue(r["ok"], r)
        finally:
            os.unlink(link)

    def test_a_folder_to_read_under_a_home_is_bound_back(self):
        problem = copy_into(self.folders[-1], "problem_helper.py",
                            PROBLEM_USING_HELPER.replace("@LIB@", self.lib))
        kernel = copy_into(self.folders[-1], "kernel_clamp.py",
                           fixture_text("eval", "relu_good.py"))
        r = self.verify(problem, kernel)
        self.assertTrue(r["ok"], r)

    def test_a_socket_beside_a_bound_back_file_stays_out_of_reach(self):
        """Only the job's own files are bound back, never the folder that holds them."""
        if not self.status["socket_paths"].startswith("hidden"):
            self.skipTest("no mount namespace here: %s" % "; ".join(self.status["missing"]))
        folder = self.folders[0]
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        address = os.path.join(folder, "beside.sock")
        listener.bind(address)
        listener.listen(1)
        listener.settimeout(0.5)
        try:
            problem = copy_into(folder, "problem_beside.py",
                                fixture_text("eval", "relu_problem.py"))
            candidate = copy_into(folder, "kernel_beside.py", fixture_text(
                "adversarial", "cpu_unix_socket.py", ADDRESS=address))
            r = self.verify(problem, candidate)
            with self.assertRaises(socket.timeout, msg="the job connected: %s" % r):
                listener.accept()[0].close()
            self.assertIn("REPORT refused", r["error"], r)
        finally:
            listener.close()


class JobFilesWithoutSpareTest(JobFilesUnderCoveredFoldersTest):
    """Every job in a child forked for it: its files are bound back in its mount namespace."""
    ENV = {"KAGENT_EVAL_SPARE": "0"}


class BindBackTest(unittest.TestCase):
    def test_a_covered_folder_shows_only_what_is_bound_back_and_read_only_stays_so(self):
        """namespaces.enter on a folder of the test's own: a socket and a file beside what is
        bound back are gone; the writable folder takes writes, the read-only folder and file are
        readable and refuse writes (EROFS)."""
        from kagent_eval.sandbox import namespaces
        kind = namespaces.probe()[0]
        if kind is None:
            self.skipTest("no namespaces here")
        top = tempfile.mkdtemp(prefix="kagent-view-bind-")
        for sub in ("job", "lib"):
            os.mkdir(os.path.join(top, sub))
        copy_into(top, "problem.py", "x = 1\n")
        copy_into(top, "private.txt", "secret\n")
        copy_into(os.path.join(top, "lib"), "mod.py", "y = 2\n")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(os.path.join(top, "agent.sock"))
        listener.listen(1)
        try:
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    namespaces.enter(user=kind == "user", hidden=(top,),
                                     kept=(os.path.join(top, "job"),),
                                     kept_read_only=(os.path.join(top, "lib"),
                                                     os.path.join(top, "problem.py")))
                    code = _bind_back_code(top)
                finally:
                    os._exit(code)
            _, status = os.waitpid(pid, 0)
            self.assertEqual(os.WEXITSTATUS(status), 0, _BIND_BACK_CODES)
        finally:
            listener.close()
            shutil.rmtree(top)


_BIND_BACK_CODES = ("2: listing shows more or less than job, lib, problem.py; 3: a bound-back "
                    "file unreadable; 4: a read-only one writable; 5: the job folder not "
                    "writable; 6: the socket beside them reachable")


def _bind_back_code(top):
    """In the child: 0 when the view is as bound back, else the code of what is wrong."""
    import errno
    if sorted(os.listdir(top)) != ["job", "lib", "problem.py"]:
        return 2
    for path in ("lib/mod.py", "problem.py"):
        with open(os.path.join(top, path)) as f:
            if not f.read():
                return 3
    for path in ("lib/new.py", "problem.py"):
        try:
            with open(os.path.join(top, path), "a") as f:
                f.write("z = 3\n")
            return 4
        except OSError as e:
            if e.errno != errno.EROFS:
                return 4
    with open(os.path.join(top, "job", "out.txt"), "w") as f:
        f.write("ok")
    if not os.path.exists(os.path.join(top, "job", "out.txt")):
        return 5
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
        try:
            c.connect(os.path.join(top, "agent.sock"))
            return 6
        except OSError:
            return 0


class JobFilesTest(unittest.TestCase):
    def test_every_file_a_job_names_is_one_its_children_may_read(self):
        from kagent_eval.sandbox import jail
        names = {k: fixture("eval", n) for k, n in (
            ("problem", "relu_problem.py"), ("candidate", "relu_good.py"),
            ("kernel_problem", "relu_problem.py"), ("kernel", "relu_good.py"),
            ("adapter", "relu_good.py"))}
        spec = dict(names, candidates=[fixture("eval", "relu_good.py"), "source text\n"])
        self.assertEqual(set(jail.job_files(spec)), {os.path.abspath(p) for p in names.values()})


    def test_a_path_that_names_no_file_where_the_job_runs_is_said_to_be_missing(self):
        from kagent_eval.common import loader
        with self.assertRaisesRegex(FileNotFoundError, "/nowhere/problem.py: no such file"):
            loader.load_module("problem", "/nowhere/problem.py")


class ReadyLineTest(unittest.TestCase):
    def test_the_ready_line_says_what_is_covered_or_that_sockets_are_reachable(self):
        w = Worker("cpu")
        try:
            status = w.ready["sandbox"]
        finally:
            w.close()
        if not status["processes"].startswith("namespace"):
            self.skipTest("no namespaces here: %s" % "; ".join(status["missing"]))
        self.assertTrue(status["socket_paths"].startswith("hidden (namespace: /run, /tmp"),
                        status["socket_paths"])
        for folder in ("/var/tmp", "/home", "/root"):
            if os.path.isdir(folder):
                self.assertIn(folder, status["socket_paths"])

    def test_without_namespaces_the_ready_line_says_named_sockets_are_reachable(self):
        w = Worker("cpu", env={"KAGENT_EVAL_NAMESPACES": "0"})
        try:
            status = w.ready["sandbox"]
        finally:
            w.close()
        self.assertEqual(status["socket_paths"], "open")
        said = [m for m in status["missing"] if "named UNIX socket" in m]
        self.assertTrue(said and "tmux" in said[0] and "home folder" in said[0], status["missing"])


if __name__ == "__main__":
    unittest.main()
