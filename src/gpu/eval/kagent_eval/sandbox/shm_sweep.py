"""/dev/shm for a job without a mount namespace of its own (where it gets one, the job's /dev/shm is
a private tmpfs, gone with it: namespaces.py).

Files there are memory that outlives the process that wrote them. The worker notes what /dev/shm
held when it made the job (`snapshot`) and, once every process of the job is gone, removes what
the job left (`sweep`): an entry that is new since the snapshot, owned by the job's user, changed
since the job began, and that no live process holds open or mapped. The last rule keeps what
another process of the user (a spare, another worker's job) is using at that moment; a file
such a process made during the job, closed and not mapped, goes too (torch and Python unlink
their shared-memory files once mapped, so in practice that is a leftover).
"""
import os
import shutil
import time

SHM = "/dev/shm"


def snapshot():
    """(when, the entries of /dev/shm now)."""
    try:
        names = set(os.listdir(SHM))
    except OSError:
        names = set()
    return time.time(), names


def _in_use(uid):
    """Paths under /dev/shm that a live process of `uid` (or any, where readable) has open or
    mapped."""
    used = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        base = os.path.join("/proc", pid)
        try:
            if os.stat(base).st_uid != uid and os.geteuid() != 0:
                continue
            for fd in os.listdir(os.path.join(base, "fd")):
                try:
                    target = os.readlink(os.path.join(base, "fd", fd))
                except OSError:
                    continue
                if target.startswith(SHM + "/"):
                    used.add(target.split(" (deleted)")[0])
            with open(os.path.join(base, "maps")) as f:
                for line in f:
                    at = line.find(SHM + "/")
                    if at >= 0:
                        used.add(line[at:].rstrip("\n").split(" (deleted)")[0])
        except OSError:
            continue
    return used


def sweep(since, before, uid=None):
    """Removes what the job left in /dev/shm (module doc); returns [(name, bytes)] removed."""
    uid = os.getuid() if uid is None else uid
    try:
        names = set(os.listdir(SHM)) - before
    except OSError:
        return []
    if not names:
        return []
    used = _in_use(uid)
    removed = []
    for name in sorted(names):
        path = os.path.join(SHM, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        # a second of slack: a file system's ctime may be coarser than time.time()
        if st.st_uid != uid or st.st_ctime < since - 1 or any(
                u == path or u.startswith(path + "/") for u in used):
            continue
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                size = sum(os.lstat(os.path.join(d, f)).st_size
                           for d, _, fs in os.walk(path) for f in fs)
                shutil.rmtree(path)
            else:
                size = st.st_size
                os.unlink(path)
            removed.append((name, size))
        except OSError:
            pass
    return removed
