"""Every process a job started dies when the job ends.

The worker is a child subreaper (PR_SET_CHILD_SUBREAPER): a process whose parent dies is handed
to the worker instead of init, also one that left its process group and session with setsid. So
once a sandboxed child has been reaped, every other child of the worker that is not a live
sandbox is a leftover of a finished job, and sweep() kills and reaps those until none is left
(the children of a killed leftover come to the worker in turn).
"""
import ctypes
import glob
import os
import signal
import time

_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper():
    """True when the kernel took it (Linux >= 3.4)."""
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def children():
    """Pids of this process's children (zombies included)."""
    me = os.getpid()
    found = set()
    lists = glob.glob("/proc/%d/task/*/children" % me)
    if lists:
        for path in lists:
            try:
                with open(path) as f:
                    found.update(int(p) for p in f.read().split())
            except OSError:
                pass
        return found
    for path in glob.glob("/proc/[0-9]*/stat"):  # kernels built without CONFIG_PROC_CHILDREN
        try:
            with open(path) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[1]) == me:
                found.add(int(path.split("/")[2]))
        except (OSError, IndexError, ValueError):
            pass
    return found


def sweep(keep=(), timeout=10.0):
    """Kills and reaps every child not in `keep`, repeatedly, until none is left or `timeout`
    passes (a process stuck in the kernel cannot be reaped). Returns how many were killed."""
    killed = 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        strays = children() - set(keep)
        if not strays:
            break
        for pid in strays:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        for pid in strays:
            while time.monotonic() < deadline:
                try:
                    if os.waitpid(pid, os.WNOHANG)[0] == pid:
                        break
                except ChildProcessError:
                    break
                time.sleep(0.002)
    return killed
