"""Hostile cases that try to escape the job: UNIX sockets on the host (by path, abstract, a tmux
server's or an ssh-agent's of the worker's user), signals to other processes, files outside the
job (/etc/shadow, home, /tmp, site-packages) and descriptors the parent left open."""
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from hostile_base import Case, candidate_report, missing_layer


class _Listener(Case):
    """A UNIX socket listening on the host, owned by this (the test's) process."""
    fixture = "cpu_unix_socket.py"

    @classmethod
    def layer(cls, status):
        return missing_layer(status, cls.status_key, cls.closed_by, "UNIX sockets open")

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
            return "connected (%s)" % candidate_report(result)
        except socket.timeout:
            pass
        report = candidate_report(result) or ""
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
        report = candidate_report(result) or ""
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
            # the socket's path exists once the agent binds it, a moment before it listens:
            # ssh-add then cannot connect (exit 2), so it is tried again for a few seconds
            for attempt in range(50):
                try:
                    self.as_user(["ssh-add", "-q", key], extra_env={"SSH_AUTH_SOCK": self.socket})
                    break
                except subprocess.CalledProcessError as e:
                    if e.returncode != 2 or attempt == 49 or self.daemon.poll() is not None:
                        raise
                    time.sleep(0.1)
        except BaseException:
            self.cleanup()
            raise

    def values(self):
        return dict(super().values(), SOCKET=self.socket)

    def reached(self, result):
        report = candidate_report(result) or ""
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
        return missing_layer(status, "signals", ("namespace", "landlock"), "signals open")

    def __init__(self, uid, status):
        super().__init__(uid, status)
        ids = {"user": uid} if uid != os.getuid() else {}
        self.victim = subprocess.Popen(["sleep", "120"], **ids)

    def values(self):
        return dict(super().values(), PID=self.victim.pid)

    def reached(self, result):
        try:
            self.victim.wait(timeout=0.5)
            return "killed pid %d (%s)" % (self.victim.pid, candidate_report(result))
        except subprocess.TimeoutExpired:
            pass
        report = candidate_report(result) or ""
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
        report = candidate_report(result) or ""
        if report.startswith("refused") or report == "read=0":
            return ""
        return report or "job %s" % result.get("code")


class WriteOutside(Case):
    name = "write outside the job (home, /tmp, site-packages)"
    fixture = "cpu_write_outside.py"

    @staticmethod
    def layer(status):
        return missing_layer(status, "writes", ("landlock",), "writes open")

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
        report = candidate_report(result) or ""
        if not found and not report.startswith("read=refused wrote=refused"):
            found.append("job %s: %s" % (result.get("code"), report or result.get("error")))
        return ", ".join(found)
