"""The process limit of a job where the kernel gives none: root without a pids cgroup.

The kernel exempts root from RLIMIT_NPROC, and a machine may not delegate the pids controller
(a container whose own group holds processes cannot enable it for child groups). Root's jobs
still run in a PID namespace of their own (namespaces.py), so the worker can count what a job
runs: every task (thread) of every process in that namespace. While a job's child runs, the
worker counts them every WATCH_S; past the job's limit it kills the namespace's first process,
which takes every other one with it. Not a hard limit like a cgroup's: a fork bomb grows for
up to WATCH_S before it is stopped, and the job fails EPROCESSES all the same.

    namespace_of(relay_pid) -> the "pid:[inode]" of the job's namespace, or None
    count_tasks(ns) -> tasks in it now
"""
import os

WATCH_S = 0.05


def namespace_of(relay_pid):
    """The PID namespace of a job whose relay (the process the worker forked, which stays
    outside the namespace: namespaces.enter) is relay_pid: its first child's. None before the
    namespace's first process exists."""
    try:
        with open("/proc/%d/task/%d/children" % (relay_pid, relay_pid)) as f:
            kids = f.read().split()
        if not kids:
            return None
        return os.readlink("/proc/%s/ns/pid" % kids[0])
    except OSError:
        return None


def _threads(pid):
    with open("/proc/%s/stat" % pid) as f:
        stat = f.read()
    # the fields after the command name (which may hold spaces and parentheses): num_threads is
    # the 20th field of the line, the 18th after the name
    return int(stat[stat.rindex(")") + 2:].split()[17])


def count_tasks(ns):
    """Tasks of every process whose PID namespace is ns (processes that end meanwhile are left
    out)."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.readlink("/proc/%s/ns/pid" % entry) != ns:
                continue
            total += _threads(entry)
        except (OSError, ValueError, IndexError):
            continue
    return total
