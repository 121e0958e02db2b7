"""Talks to a real evaluator worker process over its JSON-lines protocol (no fakes)."""
import glob
import json
import os
import select
import subprocess
import sys
import time
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIX = os.path.join(ROOT, "tests", "fixtures")
PYTHON = os.environ.get("KAGENT_TEST_PYTHON", sys.executable)


def have_cuda():
    """True where torch sees a CUDA device (the GPU checks report themselves skipped otherwise)."""
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:
        return False


def fixture(*parts):
    return os.path.join(FIX, *parts)


def planted(text, old, new):
    """text with its one `old` replaced by `new`: a fixture with a planted fault (a compile error,
    a wrong value) made from the right one, so the two cannot drift apart."""
    assert text.count(old) == 1, "planted: %r must stand exactly once" % old
    return text.replace(old, new)


def fixture_text(*parts, **values):
    """A fixture's source with each @NAME@ replaced by values[NAME] (tokens, ports, pids)."""
    with open(fixture(*parts)) as f:
        text = f.read()
    for key, value in values.items():
        text = text.replace("@%s@" % key, str(value))
    return text


def processes_with(token):
    """Pids of the processes whose command line holds `token`."""
    found = []
    for path in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            with open(path, "rb") as f:
                if token.encode() in f.read():
                    found.append(int(path.split("/")[2]))
        except OSError:
            pass
    return found


def children_of(pid):
    found = []
    for path in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(path) as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(path.split("/")[2]))
        except (OSError, IndexError, ValueError):
            pass
    return found


class Worker:
    """env: variables added to the worker's environment; log: its --log file (default
    KAGENT_WORKER_LOG); user: run it as this OS user (needs root); args: more command-line
    arguments (--lease); prefix: a command that execs the worker's (bash -c 'exec 7<f ... "$@"'
    leaves it descriptors its parent held)."""

    def __init__(self, device="cpu", threads=None, env=None, log=None, user=None, args=(),
                 prefix=()):
        self.settings = dict(device=device, threads=threads, env=env, log=log, user=user, args=args)
        # KAGENT_EVAL_PYTHONPATH: another copy of the evaluator (a benchmark's "before")
        env = dict(os.environ, PYTHONPATH=os.environ.get("KAGENT_EVAL_PYTHONPATH")
                   or os.path.join(ROOT, "src", "gpu", "eval"), **(env or {}))
        argv = [PYTHON, "-m", "kagent_eval.worker", "--device", str(device)]
        if threads:
            argv += ["--threads", str(threads)]
        argv = list(prefix) + argv + list(args)
        log = log or os.environ.get("KAGENT_WORKER_LOG")
        if log:
            argv += ["--log", log]
        ids = {}
        if user is not None:
            import pwd
            ids = dict(user=user, group=pwd.getpwnam(user).pw_gid, extra_groups=[])
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
            cwd=ROOT, **ids)
        self.next_id = 0
        self._buf = b""
        self.ready = self._read(120)

    def _read(self, timeout):
        """The worker's next protocol line. Read from the fd with a buffer of our own: the
        worker may send two lines at once (a lease release and the next acquire), and a line
        left in a file object's buffer would not wake select."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("worker did not answer")
            r, _, _ = select.select([fd], [], [], left)
            if r:
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise EOFError("worker closed stdout")
                self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def send(self, obj):
        self.proc.stdin.write((json.dumps(obj) + "\n").encode())
        self.proc.stdin.flush()

    def request(self, op, job=None, timeout=300):
        self.next_id += 1
        self.send({"id": self.next_id, "op": op, "job": job})
        reply = self._read(timeout)
        assert reply.get("id") == self.next_id, reply
        return reply

    def job(self, op, problem, candidate, **extra):
        job = dict(problem=fixture("eval", problem), candidate=candidate, **extra)
        reply = self.request(op, job)
        assert reply["ok"], reply
        return reply["result"]

    def close(self):
        try:
            self.request("shutdown", timeout=20)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except Exception:
                pass


class CpuWorkerTest(unittest.TestCase):
    """A test case whose tests share one CPU-mode worker, `self.w`, started once for the class
    and closed after it."""

    @classmethod
    def setUpClass(cls):
        cls.w = Worker("cpu")

    @classmethod
    def tearDownClass(cls):
        cls.w.close()
