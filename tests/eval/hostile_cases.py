"""Hostile candidates against the sandbox, each with what it would reach if the sandbox let it
(tests/fixtures/adversarial/cpu_*): one list for the test (test_cpu_hostile.py, which asserts
that each reaches nothing) and for the bench (bench/hostile.py, which prints a table).

A case prepares what it attacks (a listening socket, a victim process), runs its candidate
through a real worker and says what it reached: "" for nothing, else a short description.
"""
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile

from worker_client import fixture_text

MEMORY_MB = 1024  # the CPU workers' memory limit (KAGENT_EVAL_MEMORY_MB); the hogs take twice
                  # the limit of the worker they run in
FORK_DEPTH = 8    # the fork bomb's tree: 511 shells, each with a sleep, at once
CHILDREN = 300


def _report(result):
    """The candidate's "REPORT ..." line (in its error), or None."""
    m = re.search(r"REPORT ([^\n\"']*)", result.get("error") or "")
    return m.group(1).strip() if m else None


class Case:
    name = ""
    fixture = ""
    root_only = False  # meaningful only when the worker runs as root

    def __init__(self, uid, status):
        self.uid = uid  # the worker's user
        self.status = status  # the worker's sandbox status
        self.token = secrets.token_hex(8)

    def values(self):
        return {"TOKEN": self.token}

    @staticmethod
    def layer(status):
        """None when the worker (its ready line's `sandbox`) has the layer that stops this case,
        else why not (what the worker reports missing)."""
        return None

    def reached(self, result):
        raise NotImplementedError

    def cleanup(self):
        pass

    def limit_mb(self):
        return self.status.get("memory_mb") or MEMORY_MB

    def run(self, worker, problem="relu_problem.py"):
        """(result, reached). problem: a fixture of tests/fixtures/eval (a GPU one on a GPU)."""
        try:
            result = worker.job("verify", problem,
                                fixture_text("adversarial", self.fixture, **self.values()))
            return result, self.reached(result)
        finally:
            self.cleanup()


def _missing(status, key, good, what):
    """Why the layer `key` is missing here, or None to run the case: where the worker's status
    has no such key (an evaluator from before the layer), the case runs and shows what it reaches."""
    if key not in status or status[key] in good:
        return None
    return "%s: %s=%r here (%s)" % (what, key, status.get(key), "; ".join(status["missing"]) or "?")


def _process_limit(status):
    return _missing(status, "process_limit", ("cgroup", "rlimit", "watch"), "no process limit")


class ForkBomb(Case):
    name = "fork bomb (%d shells)" % (2 ** (FORK_DEPTH + 1) - 1)
    fixture = "cpu_fork_bomb.py"
    layer = staticmethod(_process_limit)

    def values(self):
        return dict(super().values(), DEPTH=FORK_DEPTH)

    def reached(self, result):
        """Under RLIMIT_NPROC (no pids cgroup) the shells swallow their refused forks, so the
        job may end without EPROCESSES: what counts is that the tree stayed within the limit."""
        if result.get("code") == "EPROCESSES":
            return ""
        m = re.search(r"processes=(\d+)", _report(result) or "")
        if m and self.status.get("max_processes") and int(m.group(1)) < self.status["max_processes"]:
            return ""
        return "%s, job %s" % (_report(result) or "ran", result.get("code") or "ok")


class ManyChildren(Case):
    name = "%d child processes" % CHILDREN
    fixture = "cpu_many_children.py"
    layer = staticmethod(_process_limit)

    def values(self):
        # past the limit wherever it is (4 per core on a machine of more than 64 cores)
        return dict(super().values(), CHILDREN=max(CHILDREN, (self.status.get("max_processes") or 0) + 50))

    def reached(self, result):
        if result.get("code") == "EPROCESSES":
            return ""
        return "%s, job %s" % (_report(result) or "ran", result.get("code") or "ok")


class ShmHog(Case):
    name = "/dev/shm hog (twice the memory limit)"
    fixture = "cpu_shm_hog.py"

    @staticmethod
    def layer(status):
        if status.get("shm") == "swept":  # the machine's /dev/shm: the memory cgroup counts it
            return _missing(status, "memory_counts", ("all (cgroup)",), "/dev/shm not counted")
        return _missing(status, "shm", ("private",), "no private /dev/shm")

    def values(self):
        return dict(super().values(), MB=2 * self.limit_mb())

    def path(self):
        return "/dev/shm/kagent-shm-%s" % self.token

    def reached(self, result):
        found = []
        if os.path.exists(self.path()):
            found.append("%d MB left in /dev/shm after the job" % (os.path.getsize(self.path()) >> 20))
        m = re.search(r"wrote=(\d+)", _report(result) or "")
        if m and int(m.group(1)) > self.limit_mb():
            found.append("wrote %s MB past a %d MB limit" % (m.group(1), self.limit_mb()))
        if not m and result.get("code") != "EMEMORY":
            found.append("job %s: %s" % (result.get("code") or "ok", (result.get("error") or "")[:200]))
        return "; ".join(found)

    def cleanup(self):
        try:
            os.unlink(self.path())
        except FileNotFoundError:
            pass


class SharedMmapHog(Case):
    name = "shared anonymous mmap (twice the limit)"
    fixture = "cpu_shared_mmap_hog.py"

    @staticmethod
    def layer(status):
        return _missing(status, "memory_counts", ("all (cgroup)",), "shared memory not counted")

    def values(self):
        return dict(super().values(), MB=2 * self.limit_mb())

    def reached(self, result):
        if result.get("code") == "EMEMORY":
            return ""
        return "held %d MB past a %d MB limit, job %s" % (2 * self.limit_mb(), self.limit_mb(),
                                                          result.get("code") or "ok")


class _Listener(Case):
    """A UNIX socket listening on the host, owned by this (the test's) process."""
    fixture = "cpu_unix_socket.py"

    @classmethod
    def layer(cls, status):
        return _missing(status, cls.status_key, cls.closed_by, "UNIX sockets open")

    def __init__(self, uid, status):
        super().__init__(uid, status)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.bind_address())
        self.sock.listen(1)
        self.sock.settimeout(0.5)

    def values(self):
        return dict(super().values(), ADDRESS=self.address)

    def reached(self, result):
        try:
            conn, _ = self.sock.accept()
            conn.close()
            return "connected (%s)" % _report(result)
        except socket.timeout:
            pass
        report = _report(result) or ""
        return "" if report.startswith("refused") else "job %s: %s" % (result.get("code"), report)

    def cleanup(self):
        self.sock.close()


class UnixSocketByPath(_Listener):
    """Where the machine's daemons listen (/run: systemd, D-Bus, Docker)."""
    name = "host UNIX socket by path (/run)"
    root_only = True  # an ordinary user cannot make one in /run
    status_key, closed_by = "socket_paths", ("hidden (namespace)",)

    def bind_address(self):
        self.folder = tempfile.mkdtemp(prefix="kagent-hostile-", dir="/run")
        self.address = os.path.join(self.folder, "host.sock")
        return self.address

    def cleanup(self):
        super().cleanup()
        shutil.rmtree(self.folder, ignore_errors=True)


class AbstractUnixSocket(_Listener):
    name = "abstract UNIX socket (the test's)"
    status_key, closed_by = "abstract_sockets", ("namespace", "landlock")

    def bind_address(self):
        self.address = "@kagent-hostile-%s" % self.token
        return "\0" + self.address[1:]


class SignalOtherProcess(Case):
    name = "SIGKILL to a process of its user"
    fixture = "cpu_signal_other.py"

    @staticmethod
    def layer(status):
        return _missing(status, "signals", ("namespace", "landlock"), "signals open")

    def __init__(self, uid, status):
        super().__init__(uid, status)
        ids = {"user": uid} if uid != os.getuid() else {}
        self.victim = subprocess.Popen(["sleep", "120"], **ids)

    def values(self):
        return dict(super().values(), PID=self.victim.pid)

    def reached(self, result):
        try:
            self.victim.wait(timeout=0.5)
            return "killed pid %d (%s)" % (self.victim.pid, _report(result))
        except subprocess.TimeoutExpired:
            pass
        report = _report(result) or ""
        return "" if report.startswith("refused") else "job %s: %s" % (result.get("code"), report)

    def cleanup(self):
        if self.victim.poll() is None:
            self.victim.send_signal(signal.SIGKILL)
        self.victim.wait()


class ReadShadow(Case):
    name = "read /etc/shadow"
    fixture = "cpu_read_shadow.py"
    root_only = True  # an ordinary user cannot read it anyway

    @staticmethod
    def layer(status):
        if status.get("reads") == "landlock" or status.get("processes", "").startswith("namespace"):
            return None
        return "neither a read rule nor a mount namespace here (%s)" % "; ".join(status["missing"])

    def reached(self, result):
        report = _report(result) or ""
        if report.startswith("refused") or report == "read=0":
            return ""
        return report or "job %s" % result.get("code")


class WriteOutside(Case):
    name = "write outside the job (home, /tmp, site-packages)"
    fixture = "cpu_write_outside.py"

    @staticmethod
    def layer(status):
        return _missing(status, "writes", ("landlock",), "writes open")

    def targets(self):
        import pwd
        import torch
        name = "kagent_sandbox_probe_" + self.token
        return [os.path.join(pwd.getpwuid(self.uid).pw_dir, name), os.path.join("/tmp", name),
                os.path.join(os.path.dirname(torch.__file__), name)]

    def reached(self, result):
        return ", ".join(p for p in self.targets() if os.path.exists(p))

    def cleanup(self):
        for p in self.targets():
            try:
                os.unlink(p)
            except OSError:
                pass


CASES = [ForkBomb, ManyChildren, ShmHog, SharedMmapHog, UnixSocketByPath, AbstractUnixSocket,
         SignalOtherProcess, ReadShadow, WriteOutside]


def applicable(case, uid):
    return not (case.root_only and uid != 0)
