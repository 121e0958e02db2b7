"""The process limit of a job where the kernel gives none: root without a pids cgroup.

The kernel exempts root from RLIMIT_NPROC, and a machine may not delegate the pids controller
(a container whose own group holds processes cannot enable it for child groups). Root's jobs
still run in a PID namespace of their own (namespaces.py), where every process descends from
the namespace's first one (an orphan is handed to it), so the worker can count what a job runs:
every task (thread) of that tree. While a job's child runs, outside its timed stages, the
worker counts them every WATCH_S; past the job's limit it kills the job, and the namespace's
processes die with its first one. Not a hard limit like a cgroup's: a fork bomb grows for up
to WATCH_S (or a timed stage) first, up to the namespace's pid_max where the kernel keeps one
(namespaces.task_cap), and the job fails EPROCESSES all the same.

    first_of(relay_pid) -> the job namespace's first process (as this process sees it), or None
    count_tasks(first) -> tasks of it and of every process below it now
"""
import os

WATCH_S = 0.1


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
