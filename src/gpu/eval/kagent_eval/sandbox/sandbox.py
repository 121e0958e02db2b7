"""Fork server: run one function in a child process with per-stage deadlines.

The worker forks after its heavy imports but before any CUDA call, so each child creates its
own CUDA context (~0.25 s) and a crash, hang or sticky CUDA error dies with the child. The child
reports over a pipe with `wire` frames; the parent only reads data from it. Each child enters the
sandbox (`jail`) in its own job folder, and when it has been reaped every process it left behind
is killed (`reaper`).
"""
import contextlib
import ctypes
import os
import signal
import sys
import time
import traceback

from ..common import wire
from . import candidate_cache, jail, process_watch, reaper

_PR_SET_PDEATHSIG = 1
DEFAULT_TIMEOUTS = {"start": 60.0, "gate": 60.0, "gate_shared": 60.0, "load": 120.0, "build": 120.0,
                    "compile": 180.0, "compile_host": 180.0, "run": 120.0, "audit": 120.0,
                    "benchmark": 300.0, "profile": 600.0, "baseline": 900.0, "compile_unleased": 900.0,
                    # a load_inline build (ext_build.py): a cold nvcc compile of 100 s is normal
                    "compile_source": 600.0}
# the stage a child announces at a gate (Channel.gate), by the lease mode it waits for, and the
# mode the worker takes the lease in at each such stage
GATE_STAGES = {"shared": "gate_shared", "exclusive": "gate"}
GATE_MODES = {stage: mode for mode, stage in GATE_STAGES.items()}


class Channel:
    """The child's end: stage announcements and result frames."""

    def __init__(self, fd, gate_fd=None):
        self.fd = fd
        self.gate_fd = gate_fd  # where the worker opens this child's gates, or None: none
        self.last_stage = None  # what a stage interrupted by a gate announces again after it

    def gate(self, mode):
        """Stops until the worker holds the GPU's lease in `mode` for this child (run_child's
        gate); False, at once, for a child that has no gate."""
        if self.gate_fd is None:
            return False
        self.stage(GATE_STAGES[mode])
        wire.recv(self.gate_fd)
        return True

    def stage(self, name):
        wire.send(self.fd, {"type": "stage", "stage": name})
        self.last_stage = name

    def send(self, obj, arrays=()):
        wire.send(self.fd, obj, arrays)


def _die_with_parent():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except Exception:
        pass


# children forked and not yet reaped: what a sweep for leftovers must spare
LIVE = set()


def fork_child(child_main, *child_args):
    """Forks; the child runs child_main(*child_args) and never returns. The parent gets the pid."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        child_main(*child_args)
    LIVE.add(pid)
    return pid


def close_all_but(keep):
    """Closes every descriptor but stdin, stdout, stderr and `keep` (None entries ignored)."""
    keep = sorted({0, 1, 2} | {k for k in keep if k is not None})
    for low, high in zip([k + 1 for k in keep], keep[1:] + [max(os.sysconf("SC_OPEN_MAX"), 65536)]):
        if low < high:
            os.closerange(low, high)


def _child_main(fd, keep, target, args, job_dir, role, reads=None, gate_fd=None):
    """keep: descriptors the child needs besides fd and gate_fd (a spare's job pipe). reads: the
    files the job may read besides the system's, or None to leave reads open until the child
    narrows them itself (a spare, when its job arrives)."""
    code = 0
    try:
        os.setpgid(0, 0)
        _die_with_parent()
        # nothing of the worker's reaches the job: not its protocol stream, its pipes to other
        # children (a spare's: a candidate could write the next one's job), a lease's lock, nor
        # what its own parent left open (a .env on fd 7: issue #53)
        close_all_but((fd, gate_fd) + tuple(keep))
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.dup2(2, 1)  # candidate prints must never reach the protocol stream
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        jail.enter(role, job_dir, reads or ())
        if reads is not None:
            jail.narrow_reads(reads)
        target(Channel(fd, gate_fd), *args)
        wire.send(fd, {"type": "done"})
    except BaseException as e:  # report any failure, including SystemExit from the candidate
        try:
            wire.send(fd, {"type": "error", "error_type": type(e).__name__,
                           "message": str(e)[:2000], "traceback": traceback.format_exc()[-4000:]})
        except Exception:
            code = 3
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:
            pass
        os._exit(code)


def _signal_name(num):
    try:
        return signal.Signals(num).name
    except ValueError:
        return "signal %d" % num


class Outcome:
    """What a child did: messages (obj, arrays) in order, the last stage it announced, and a
    failure (code, message) if it crashed, hung or stopped early."""

    def __init__(self):
        self.messages = []
        self.stage = "start"
        self.failure = None
        self.elapsed = 0.0
        self.exit_s = None  # from the child's last message until it was reaped
        self.pending_exit = None  # (pid, when its last message came) while it exits (collect)
        self.exited_at = None  # when it was first seen gone (note_exit)
        self.cpu_s = None  # CPU seconds of it and what it waited for, from its fork: _wait_child

    def of_type(self, kind):
        return [(o, a) for o, a in self.messages if o.get("type") == kind]

    def first(self, kind):
        return next(iter(self.of_type(kind)), (None, None))

    def stage_durations(self):
        """Seconds the child spent in each stage it announced, to its last message."""
        marks = [(o["stage"], o["t"]) for o, _ in self.messages if o.get("type") == "stage"]
        ends = [t for _, t in marks[1:]] + [max([o.get("t", 0) for o, _ in self.messages] + [0])]
        durations = {}
        for (stage, t), t_next in zip(marks, ends):
            durations[stage] = durations.get(stage, 0.0) + (t_next - t)
        return durations

    def out_of_gpu_memory(self):
        """Whether the child ended on a CUDA allocation that failed."""
        err, _ = self.first("error")
        text = "%s %s" % ((err or {}).get("error_type"), (err or {}).get("message"))
        return "OutOfMemoryError" in text or "CUDA out of memory" in text


def _in_child(rfd, *child_main_args):
    os.close(rfd)
    _child_main(*child_main_args)


# children that never run candidate code: they get the trusted caches (jail), which candidates
# cannot write; any other child is a candidate's
TRUSTED_TARGETS = {"kagent_eval.child.child_reference.run", "kagent_eval.profile.peaks.run"}
# a candidate's child that runs with no GPU (jail.enter's role "compile"): its compile step
NO_GPU_TARGETS = {"kagent_eval.child.child_compile.run"}


def role_of(target):
    name = "%s.%s" % (getattr(target, "__module__", ""), getattr(target, "__name__", ""))
    if name in NO_GPU_TARGETS:
        return "compile"
    return "trusted" if name in TRUSTED_TARGETS else "candidate"


def run_child(target, args=(), timeouts=None, gate=None):
    """Fork, run target(channel, *args) in the child, collect its frames until it exits. The
    child may read the files its job names (jail.job_files of the first dict in args).
    gate(stage) -> bool, if given, runs for every stage the child announces; where it says True
    the child waits at a gate (Channel.gate) and is let go on (unleased_compile.follow). The
    child closes every descriptor but its own (close_all_but)."""
    jail_role = role_of(target)  # what jail.enter gets; "compile" is a candidate's otherwise
    role = "candidate" if jail_role == "compile" else jail_role
    job_dir = jail.new_job_dir(role)
    rfd, wfd = wire.pipe()
    gate_r = gate_w = None
    if gate is not None:
        gate_r, gate_w = os.pipe()
    spec = next((a for a in args if isinstance(a, dict)), {})
    on_stage = None
    if gate is not None:
        def on_stage(name):
            if gate(name):
                try:
                    wire.send(gate_w, {"go": True})
                except OSError:
                    pass  # the child is gone; collect reports how
    try:
        if role == "candidate":  # its sources' cache entry (candidate_cache.py)
            candidate_cache.lend(job_dir, spec)
        pid = fork_child(_in_child, rfd, wfd, (), target, args, job_dir, jail_role,
                         jail.job_files(spec), gate_r)
        os.close(wfd)
        return collect(pid, rfd, timeouts, on_stage, job_dir=job_dir, role=role)
    finally:
        if gate is not None:
            os.close(gate_r)
            os.close(gate_w)
        jail.remove_job_dir(job_dir)


def limits_with(timeouts):
    limits = dict(DEFAULT_TIMEOUTS)
    limits.update(timeouts or {})
    return limits


def collect(pid, rfd, timeouts, on_stage=None, job_dir=None, defer_exit=False, role="candidate",
            on_message=None):
    """Read a child's frames until it exits, with per-stage deadlines; reaps it and closes rfd.
    on_stage(name) runs as the child announces a stage (before its deadline starts), on_message(obj,
    arrays) for every other frame as it arrives (early_checks.py). job_dir: the child's job folder,
    whose cgroups tell a hit limit. defer_exit: a child that said "done" is left to exit (its CUDA
    teardown) while the caller checks what it sent, then calls finish_exit(outcome) before replying.
    role: the child's (role_of); a trusted child's tasks are not counted (no cgroup limits them)."""
    limits = limits_with(timeouts)
    out = Outcome()
    t_start = time.monotonic()
    deadline = t_start + limits["start"]
    done = False
    watch = process_watch.watch(pid, jail.process_watch_of(job_dir)) \
        if job_dir and role == "candidate" else None
    try:
        while True:
            if watch is not None and not watch.wait(rfd, deadline, out.stage):
                out.failure = watch.failure
                break
            try:
                obj, arrays = wire.recv(rfd, deadline)
            except wire.Timeout:
                out.failure = ("ETIMEDOUT", "stage %s ran past %.0f s" % (
                    out.stage, limits.get(out.stage, limits["run"])))
                break
            except wire.Closed:
                break
            except wire.WireError as e:
                out.failure = ("EWORKER", "bad data from the sandbox: %s" % e)
                break
            now = time.monotonic()
            kind = obj.get("type") if isinstance(obj, dict) else None
            if kind == "stage":
                out.stage = str(obj.get("stage"))
                out.messages.append(({"type": "stage", "stage": out.stage, "t": now}, []))
                if on_stage is not None:
                    on_stage(out.stage)
                deadline = time.monotonic() + limits.get(out.stage, limits["run"])
                continue
            obj["t"] = now
            out.messages.append((obj, arrays))
            if on_message:
                on_message(obj, arrays)
            done = kind == "done"
            if done or kind == "error":
                break
        if watch is not None and out.failure is None and watch.over():
            out.failure = watch.failure  # what it left running as it ended counts too
    finally:
        os.close(rfd)
        t_last = time.monotonic()
        if done and defer_exit:
            # nothing more is read from it and its status is not needed: it said "done"
            out.pending_exit = (pid, t_last)
            status = 0
        else:
            status = _reap(pid, kill=not done and out.failure is not None, out=out)
            out.exit_s = time.monotonic() - t_last
        out.elapsed = time.monotonic() - t_start
    err, _ = out.first("error")
    if out.failure is None and err is not None:
        memory = jail.memory_failure(err.get("error_type"), err.get("message"))
        if memory:
            out.failure = ("EMEMORY", memory)
    limit = jail.limit_failure(job_dir, "%s %s" % ((err or {}).get("error_type"), (err or {}).get(
        "message"))) if job_dir else None
    if limit:  # a job that ran into a limit fails for it, whatever it did next
        out.failure = limit
    if out.failure is None and not done and not out.of_type("error"):
        if os.WIFSIGNALED(status):
            out.failure = ("ECRASH", "the candidate's process died of %s in stage %s" % (
                _signal_name(os.WTERMSIG(status)), out.stage))
        else:
            out.failure = ("ECRASH", "the candidate's process exited (code %s) in stage %s" % (
                os.WEXITSTATUS(status) if os.WIFEXITED(status) else "?", out.stage))
    return out


def note_exit(out):
    """Looks (without reaping it) whether a child collect() left exiting has ended, and notes
    when it was first seen so: the worker calls it between its checks, so a child's exit_s is
    its teardown within one check's time, not the checks it overlapped."""
    pending = getattr(out, "pending_exit", None)
    if pending is None or getattr(out, "exited_at", None) is not None:
        return
    try:
        gone = os.waitid(os.P_PID, pending[0], os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        gone = True
    if gone is not None:
        out.exited_at = time.monotonic()


def finish_exit(out):
    """Waits for a child collect() left exiting (defer_exit) and kills what it left behind;
    exit_s is then the time from its last message until it was first seen gone (note_exit), or
    reaped here. Safe to call twice."""
    pending = getattr(out, "pending_exit", None)
    if pending is None:
        return
    note_exit(out)
    out.pending_exit = None
    pid, t_last = pending
    _reap(pid, kill=False, out=out)
    out.exit_s = (getattr(out, "exited_at", None) or time.monotonic()) - t_last
    job_dir, out.job_dir_after_exit = getattr(out, "job_dir_after_exit", None), None
    if job_dir:
        jail.remove_job_dir(job_dir)


def _reap(pid, kill, out=None):
    """Wait for the child (killing its whole process group first when it must not go on), then
    kill whatever else it started; out.cpu_s is then the child's CPU time."""
    try:
        return _wait_child(pid, kill, out)
    finally:
        LIVE.discard(pid)
        reaper.sweep(keep=LIVE)


def _wait_child(pid, kill, out=None):
    if kill:
        for target in (-pid, pid):
            with contextlib.suppress(OSError):
                os.kill(target, signal.SIGKILL)
    deadline = time.monotonic() + 10.0
    while True:
        try:
            got, status, usage = os.wait4(pid, 0 if kill else os.WNOHANG)
        except ChildProcessError:
            return 0
        if got == pid:
            if out is not None:  # user and system; a spare's preparation is included
                out.cpu_s = round(usage.ru_utime + usage.ru_stime, 4)
            return status
        if time.monotonic() > deadline:
            kill = True
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
        time.sleep(0.005)
