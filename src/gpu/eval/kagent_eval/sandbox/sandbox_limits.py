"""The limits of a candidate's job (jail.py, README.md "Sandbox"): how many processes and how much
memory, from the environment and the machine, and how the worker holds a job to its task count.
"""
import glob
import os

from . import namespaces, process_watch


# tasks (processes and threads) a candidate's job may have at once: torch's CPU threads (one per
# core), CUDA's, Triton's and TorchInductor's compile processes fit many times over
DEFAULT_MAX_PROCESSES = 256
TASKS_PER_CPU = 4  # on a machine of many cores: 4 per core where that is more


class SandboxError(Exception):
    pass


def _mem_total_mb():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def memory_limit_mb(environ=os.environ):
    """KAGENT_EVAL_MEMORY_MB (0: no limit), else half of the machine's memory."""
    value = environ.get("KAGENT_EVAL_MEMORY_MB", "").strip()
    if value:
        try:
            mb = int(value)
        except ValueError:
            raise SandboxError("KAGENT_EVAL_MEMORY_MB must be a whole number of MB, not %r" % value)
        if mb < 0:
            raise SandboxError("KAGENT_EVAL_MEMORY_MB must be >= 0")
        return mb
    return _mem_total_mb() // 2


def max_processes(environ=os.environ):
    """KAGENT_EVAL_MAX_PROCESSES (0: no limit), else DEFAULT_MAX_PROCESSES or TASKS_PER_CPU per
    core, whichever is more."""
    value = environ.get("KAGENT_EVAL_MAX_PROCESSES", "").strip()
    if not value:
        return max(DEFAULT_MAX_PROCESSES, TASKS_PER_CPU * (os.cpu_count() or 1))
    try:
        n = int(value)
    except ValueError:
        raise SandboxError("KAGENT_EVAL_MAX_PROCESSES must be a whole number, not %r" % value)
    if n < 0 or 0 < n < 16:
        raise SandboxError("KAGENT_EVAL_MAX_PROCESSES must be 0 (no limit) or at least 16")
    return n


def user_tasks():
    """Tasks (processes and threads) of this real user: what RLIMIT_NPROC counts."""
    uid, n = os.getuid(), 0
    for path in glob.glob("/proc/[0-9]*/status"):
        try:
            with open(path) as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
            if int(fields["Uid"].split()[0]) == uid:
                n += int(fields["Threads"])
        except (OSError, KeyError, ValueError, IndexError):
            pass
    return n


def process_limit(procs, groups, namespace):
    """How a candidate's job is held to `procs` tasks: "cgroup", "rlimit" (RLIMIT_NPROC, in its
    user namespace or over its user's processes), "watch" (root without a pids cgroup, in a PID
    namespace of the job's own: the worker counts and stops it, process_watch.py) or None (no
    limit asked, or root without a cgroup nor namespaces: the kernel does not apply RLIMIT_NPROC
    to root)."""
    if not procs:
        return None
    if groups.has("pids"):
        return "cgroup"
    if namespace == "user" or (not namespace and os.geteuid() != 0):
        return "rlimit"
    if namespace:  # root in a PID namespace of the job's own: the worker counts its tasks
        return "watch"
    return None


def watch_note(why_no_cgroup, procs):
    """What the ready line says of a process limit the worker keeps by counting ("watch")."""
    cap = namespaces.task_cap(procs)
    return ("root without a pids cgroup (%s): a job's processes are counted every %.2f s and it "
            "is stopped past the limit, so a fork bomb grows that long, %s" % (
                why_no_cgroup, process_watch.WATCH_S,
                "to %d tasks at most (its namespace's pid_max)" % cap if cap else
                "unbounded (Linux before 6.14 keeps one pid_max for the machine)"))
