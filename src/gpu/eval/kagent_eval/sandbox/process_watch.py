"""The worker's watch on a candidate's process limit: a job that reaches it is stopped at once.

Under a pids cgroup (job_cgroup.py) the kernel refuses the fork or thread past the limit, but a
fork bomb goes on trying until its stage times out (60 s and more, at a load of 150). So the
worker reads the group's pids.events ("max N": refused forks) every WATCH_S while the child runs,
and at the first refusal kills the job: EPROCESSES within WATCH_S of the limit (LimitWatch).

Root without a pids cgroup (a container whose own group holds processes cannot delegate it)
gets no limit from the kernel: RLIMIT_NPROC exempts root. Root's jobs still run in a PID
namespace of their own (namespaces.py), where every process descends from the namespace's first
one (an orphan is handed to it), so the worker counts what a job runs, every task (thread) of
that tree, every WATCH_S (TaskWatch); past the job's limit it kills the job, and the namespace's
processes die with its first one. Not a hard limit like a cgroup's: a fork bomb grows for up to
WATCH_S (or a timed stage) first, up to the namespace's pid_max where the kernel keeps one
(namespaces.task_cap), and the job fails EPROCESSES all the same. Under RLIMIT_NPROC in the job's
user namespace (an ordinary user) the kernel refuses at the limit and the same count stops the job
as its tasks reach it (its relay is counted there too: the namespace holds one task fewer).

    watch(relay_pid, job_dir) -> the job's watch, or None where the worker keeps none
    first_of(relay_pid) -> the job namespace's first process (as this process sees it), or None
    count_tasks(first) -> tasks of it and of every process below it now
"""
import os
import select
import signal
import time

WATCH_S = 0.1
# Stages whose figures the worker's own clock takes part in (the stage messages' arrival: the
# ETAMPER bound, the hardened loop's per-call stretches): a task count, which walks the job's
# processes, waits until they end; a cgroup's counter is one small read and goes on
TIMED_STAGES = ("benchmark", "profile")


def failure(limit):
    return ("EPROCESSES", "the job tried to run more than %d processes and threads at once "
            "(KAGENT_EVAL_MAX_PROCESSES)" % limit)


def watch(pid, how):
    """The watch of the candidate's job whose child is `pid`, by how jail holds it to its limit
    (jail.process_watch_of: the caller asks, as jail imports this module)."""
    if not how:
        return None
    limit, events, reach = how
    return LimitWatch(pid, limit, events) if events else TaskWatch(pid, limit, reach)


class _Watch:
    """wait() between the child's frames; over() once more when it is done. Past the limit the
    job's child is killed (its group, or its namespace's first process with everything in it,
    dies with it in the reap that follows) and failure is set."""
    skips_timed = False

    def __init__(self, pid, limit):
        self.pid, self.limit = pid, limit
        self.failure, self.counted = None, 0.0

    def reached(self):
        raise NotImplementedError

    def over(self):
        """Looks now; True (and the job killed, self.failure set) once it reached its limit."""
        self.counted = time.monotonic()
        if not self.reached():
            return False
        try:
            os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass
        self.failure = failure(self.limit)
        return True

    def wait(self, rfd, deadline, stage):
        """True once rfd is readable or the deadline passed (recv then decides); False when the
        job reached its limit."""
        if self.skips_timed and stage.startswith(TIMED_STAGES):
            return True
        while True:
            left = deadline - time.monotonic()
            ready = left <= 0 or select.select([rfd], [], [], min(left, WATCH_S))[0]
            if time.monotonic() - self.counted >= WATCH_S and self.over():
                return False
            if ready:
                return True


class LimitWatch(_Watch):
    """Under a pids cgroup: the kernel's count of forks refused at the limit."""

    def __init__(self, pid, limit, events_path):
        super().__init__(pid, limit)
        self.events_path = events_path

    def reached(self):
        try:
            with open(self.events_path) as f:
                return any(line.split()[:1] == ["max"] and line.split()[1] != "0" for line in f)
        except (OSError, IndexError):
            return False


class TaskWatch(_Watch):
    """In the job's PID namespace without a pids cgroup: its tasks, counted; `reach` of them
    mean the limit (past it for root, whom nothing refuses; at it under RLIMIT_NPROC)."""
    skips_timed = True

    def __init__(self, pid, limit, reach):
        super().__init__(pid, limit)
        self.first, self.reach = None, reach

    def reached(self):
        self.first = self.first or first_of(self.pid)
        return bool(self.first) and count_tasks(self.first) >= self.reach


def first_of(relay_pid):
    """The first process of a job's namespace, whose relay (the process the worker forked,
    which stays outside the namespace: namespaces.enter) is relay_pid: its one child. None
    before it exists."""
    kids = _children(relay_pid, relay_pid)
    return int(kids[0]) if kids else None


def _children(pid, tid):
    try:
        with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
            return f.read().split()
    except OSError:
        return []


def count_tasks(first):
    """Tasks of `first` and of every process below it (those that end meanwhile are left out):
    a read per task, not one per process of the machine."""
    total, stack = 0, [first]
    while stack:
        pid = stack.pop()
        try:
            tids = os.listdir("/proc/%d/task" % pid)
        except OSError:
            continue
        total += len(tids)
        for tid in tids:
            stack.extend(int(k) for k in _children(pid, tid))
    return total
