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
import time

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
        # a worker that counts the job's tasks (process_limit "watch": root without a pids
        # cgroup) stops a job that holds more than its limit for longer than its count's period;
        # one that stays past it for less is held by the namespace's pid_max alone
        hold = 0.5 if self.status.get("process_limit") == "watch" else 0
        return dict(super().values(), HOLD_S=hold,
                    CHILDREN=max(CHILDREN, (self.status.get("max_processes") or 0) + 50))

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


def _socket_paths(status):
    """Sockets by path: closed where the worker's mount namespace covers their folders."""
    if "socket_paths" not in status or str(status["socket_paths"]).startswith("hidden"):
        return None
    return "UNIX sockets by path open: socket_paths=%r here (%s)" % (
        status["socket_paths"], "; ".join(status["missing"]) or "?")


class UnixSocketByPath(_Listener):
    """Where the machine's daemons listen (/run: systemd, D-Bus, Docker)."""
    name = "host UNIX socket by path (/run)"
    root_only = True  # an ordinary user cannot make one in /run
    layer = staticmethod(_socket_paths)

    def bind_address(self):
        self.folder = tempfile.mkdtemp(prefix="kagent-hostile-", dir="/run")
        self.address = os.path.join(self.folder, "host.sock")
        return self.address

    def cleanup(self):
        super().cleanup()
        shutil.rmtree(self.folder, ignore_errors=True)


def _home_of(uid):
    """A home folder of the worker's user: its own, else /home (an ordinary user made for a test
    has none)."""
    import pwd
    home = pwd.getpwuid(uid).pw_dir
    return home if os.path.isdir(home) else "/home"


class _UsersDaemon(Case):
    """A daemon of the worker's user (a tmux server, an ssh-agent) listening on a socket in a
    folder of that user's, in the system temp folder or in a home folder (where = "temp" or
    "home"), started by the test as that user."""
    where = "temp"
    tools = ()
    layer = staticmethod(_socket_paths)

    def __init__(self, uid, status):
        super().__init__(uid, status)
        base = "/tmp" if self.where == "temp" else _home_of(uid)
        self.folder = tempfile.mkdtemp(prefix="kagent-hostile-%s-" % self.tools[0], dir=base)
        if uid != os.getuid():
            os.chown(self.folder, uid, -1)
        self.socket = os.path.join(self.folder, "sock")
        self.daemon = None

    def as_user(self, argv, extra_env=None):
        ids = {"user": self.uid} if self.uid != os.getuid() else {}
        env = dict(os.environ, HOME=self.folder, SHELL="/bin/sh", **(extra_env or {}))
        return subprocess.run(argv, cwd=self.folder, env=env, check=True, capture_output=True,
                              timeout=30, **ids)

    def cleanup(self):
        if self.daemon is not None and self.daemon.poll() is None:
            self.daemon.kill()
            self.daemon.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


class TmuxServer(_UsersDaemon):
    """`tmux -S <socket> run-shell` runs a shell command in the server, outside the sandbox."""
    name = "tmux server socket (/tmp)"
    fixture = "cpu_tmux_socket.py"
    tools = ("tmux",)

    def __init__(self, uid, status):
        super().__init__(uid, status)
        self.marker = os.path.join(self.folder, "marker-" + self.token)
        try:
            self.as_user(["tmux", "-S", self.socket, "-f", "/dev/null", "new-session", "-d",
                          "sleep 600"])
        except BaseException:
            self.cleanup()
            raise

    def values(self):
        return dict(super().values(), SOCKET=self.socket, MARKER=self.marker)

    def reached(self, result):
        report = _report(result) or ""
        if os.path.exists(self.marker):
            return "ran a shell command outside the sandbox (%s)" % report
        if "connect: refused" not in report:
            return "job %s: %s" % (result.get("code"), report)
        return ""

    def cleanup(self):
        try:
            self.as_user(["tmux", "-S", self.socket, "kill-server"])
        except (OSError, subprocess.SubprocessError):
            pass
        super().cleanup()


class TmuxServerInHome(TmuxServer):
    name = "tmux server socket (home folder)"
    where = "home"


class SshAgent(_UsersDaemon):
    """A real ssh-agent holding a key whose comment only the agent knows: a candidate that lists
    the keys shows it."""
    name = "ssh-agent socket (/tmp)"
    fixture = "cpu_ssh_agent.py"
    tools = ("ssh-agent", "ssh-keygen", "ssh-add")

    def __init__(self, uid, status):
        super().__init__(uid, status)
        self.comment = "kagent-hostile-key-" + secrets.token_hex(8)
        ids = {"user": uid} if uid != os.getuid() else {}
        try:
            self.daemon = subprocess.Popen(["ssh-agent", "-D", "-a", self.socket], cwd=self.folder,
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                           **ids)
            key = os.path.join(self.folder, "key")
            self.as_user(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", self.comment,
                          "-f", key])
            for _ in range(300):  # the agent's socket appears once it listens
                if os.path.exists(self.socket) or self.daemon.poll() is not None:
                    break
                time.sleep(0.1)
            self.as_user(["ssh-add", "-q", key], extra_env={"SSH_AUTH_SOCK": self.socket})
        except BaseException:
            self.cleanup()
            raise

    def values(self):
        return dict(super().values(), SOCKET=self.socket)

    def reached(self, result):
        report = _report(result) or ""
        if self.comment in (result.get("error") or ""):
            return "listed the agent's key %s" % self.comment
        if not report.startswith("refused"):
            return "job %s: %s" % (result.get("code"), report)
        return ""


class SshAgentInHome(SshAgent):
    name = "ssh-agent socket (home folder)"
    where = "home"


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


class InheritedDescriptors(Case):
    """Descriptors the worker's parent held (issue #53: a .env on fd 7, a file in the home folder
    on fd 8): a worker of its own is started with them (the worker the bench holds has none)."""
    name = "fds 7 and 8 left open by the parent (.env, home file)"
    fixture = "cpu_inherited_fds.py"
    tools = ("bash",)

    def run(self, worker, problem="relu_problem.py"):
        from worker_client import Worker
        folder = tempfile.mkdtemp(prefix="kagent-hostile-fds-")
        self.env_file, self.home_file = os.path.join(folder, ".env"), os.path.join(folder, "notes")
        self.key = "fake-key-" + secrets.token_hex(12)
        with open(self.env_file, "w") as f:
            f.write("ANTHROPIC_API_KEY=%s\n" % self.key)
        open(self.home_file, "w").close()
        if os.geteuid() == 0:  # the worker's user opens them, as its parent would have
            for p in (folder, self.env_file, self.home_file):
                os.chown(p, self.uid, -1)
        prefix = ["bash", "-c", 'exec 7<"$1" 8>>"$2"; shift 2; exec "$@"', "-", self.env_file,
                  self.home_file]
        own = Worker(**dict(worker.settings, prefix=prefix))
        try:
            return super().run(own, problem)
        finally:
            own.close()
            shutil.rmtree(folder, ignore_errors=True)

    def reached(self, result):
        found = []
        if self.key in repr(result):
            found.append("read the key")
        with open(self.home_file) as f:
            if f.read():
                found.append("appended to the home file")
        report = _report(result) or ""
        if not found and not report.startswith("read=refused wrote=refused"):
            found.append("job %s: %s" % (result.get("code"), report or result.get("error")))
        return ", ".join(found)


def _stopped_at_limit(status):
    """Where the worker sees a job reach its limit: a pids cgroup's counter, or the tasks of the
    job's PID namespace (not RLIMIT_NPROC over its user's tasks, without one)."""
    namespaced = str(status.get("processes")).startswith("namespace")
    if status.get("process_limit") == "rlimit" and not namespaced:
        return "no watch on the process limit: RLIMIT_NPROC without namespaces here (%s)" % (
            "; ".join(status.get("missing") or []) or "?")
    return _missing(status, "process_limit", ("cgroup", "watch", "rlimit"), "no process limit")


class EndlessForkBomb(Case):
    """A fork bomb that never stops on its own: stopped at its limit, not at the stage timeout."""
    name = "endless fork bomb (stopped at its limit)"
    fixture = "cpu_fork_bomb_unbounded.py"
    layer = staticmethod(_stopped_at_limit)
    STAGE_S = 60

    def run(self, worker, problem="relu_problem.py"):
        t0 = time.monotonic()
        source = fixture_text("adversarial", self.fixture, **self.values())
        result = worker.job("verify", problem, source, timeouts={"load": self.STAGE_S})
        self.took = time.monotonic() - t0
        return result, self.reached(result)

    def reached(self, result):
        if result.get("code") == "EPROCESSES" and self.took < self.STAGE_S / 2:
            return ""
        return "ran %.0f s (stage timeout %d s), job %s" % (self.took, self.STAGE_S,
                                                          result.get("code") or "ok")


CASES = [ForkBomb, ManyChildren, ShmHog, SharedMmapHog, UnixSocketByPath, TmuxServer,
         TmuxServerInHome, SshAgent, SshAgentInHome, AbstractUnixSocket, SignalOtherProcess,
         ReadShadow, WriteOutside, InheritedDescriptors, EndlessForkBomb]


def applicable(case, uid):
    return not (case.root_only and uid != 0) and not unavailable(case)


def unavailable(case):
    """The tools a case needs that this machine lacks (scripts/setup.sh --tests installs them),
    or None."""
    lacking = [t for t in getattr(case, "tools", ()) if not shutil.which(t)]
    return "needs %s" % ", ".join(lacking) if lacking else None
