"""PID, mount and network namespaces for each sandboxed child, where the kernel allows them: with
CAP_SYS_ADMIN (root), or unprivileged through a user namespace (refused where unprivileged user
namespaces are turned off, e.g. by Ubuntu's AppArmor default since 23.10, and inside most
containers).

The child forked by the worker unshares them and forks again: the grandchild is process 1 of the
new PID namespace and does the job, and the child only waits for it and ends the same way (a
relay, so the worker's view of the child's pid, process group, stops and exit status is
unchanged). Inside, a fresh /proc shows only the namespace's processes: no parent, no kagent-rt,
no pid 1 of the machine, so no environ of theirs to read. When process 1 ends, the kernel kills
everything left in the namespace, setsid or not. The mount namespace also gets its own
/dev/shm (a tmpfs no larger than the job's memory limit, gone with the namespace: nothing a job
writes there outlives it or escapes its limit) and covers what job_view.View names: the
machine's secret files (/etc/shadow and the like: an empty file) and the folders where named UNIX
sockets live (/run, the temp folders, the home folders: an empty folder), with only what the job
needs bound back in (its folder and caches writable; its files, Python and the toolchains under
those folders read-only; /run/nvidia-persistenced for CUDA), so a job cannot connect to the
host's daemons or a user's tmux server or ssh-agent by path. The network namespace has only its
own loopback (brought up: tools such as compute-sanitizer talk to their target over it), so
nothing outside the job can be reached, abstract UNIX sockets included (they belong to a network
namespace).

Must run before Landlock, which forbids mounting.
"""
import ctypes
import fcntl
import os
import re
import signal
import socket
import stat
import struct

CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x20000000, 0x10000000, 0x40000000
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_IFREQ = struct.Struct("16sH22x")
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 0x4000, 0x40000
_MS_NOATIME, _MS_NODIRATIME, _MS_STRICTATIME = 1024, 2048, 1 << 24
proc_guarded = False  # True in process 1 once its /proc's machine-wide entries are read-only
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE = 1, 4

_libc = ctypes.CDLL(None, use_errno=True)


def _call(ret, what):
    if ret != 0:
        e = ctypes.get_errno()
        raise OSError(e, "%s: %s" % (what, os.strerror(e)))


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


def _unshare(user):
    uid, gid = os.getuid(), os.getgid()
    if user:
        # forked from the worker, which is not dumpable: its /proc files then belong to root, and
        # an ordinary user could write neither its uid_map nor, later, its threads' names (CUDA's
        # start). The job's own processes may be dumpable: the worker's secrets are not in them
        _libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)
    flags = CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | (CLONE_NEWUSER if user else 0)
    _call(_libc.unshare(flags), "unshare")
    if user:  # the same ids inside, so files keep their owners
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", "%d %d 1" % (uid, uid))
        _write("/proc/self/gid_map", "%d %d 1" % (gid, gid))


def _own_proc():
    _call(_libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None), "mount --make-rprivate /")
    _call(_libc.mount(b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None),
          "mount proc")


# Linux 6.14 made kernel.pid_max a property of each PID namespace: written in the job's, it
# caps the tasks the job can have at once (fork and clone fail past it), a hard bound where no
# pids cgroup gives one. On an older kernel the same write would set the machine's, so it is
# never made there. The sysctl's floor is 301, and once a namespace's numbers wrap they restart
# at 300 (RESERVED_PIDS), so the cap is the job's allowance above those 300.
PID_MAX_KERNEL = (6, 14)
RESERVED_PIDS = 300


def pid_max_applies(release=None):
    m = re.match(r"(\d+)\.(\d+)", release or os.uname().release)
    return bool(m) and (int(m.group(1)), int(m.group(2))) >= PID_MAX_KERNEL


def task_cap(max_tasks):
    """The hard bound on a job's tasks at once that its namespace's pid_max gives for an
    allowance of max_tasks, or None where it gives none."""
    return RESERVED_PIDS + max_tasks if max_tasks and pid_max_applies() else None


def _cap_tasks(max_tasks):
    cap = task_cap(max_tasks)
    if cap:
        try:
            _write("/proc/sys/kernel/pid_max", str(cap + 1))
        except OSError:
            pass  # the worker's count (process_watch.py) still holds the job to its allowance


def _guard_proc():
    """Binds every machine-wide entry of the new /proc (all but the process folders and the
    links into them) onto itself read-only, so that the sandbox can let a job's processes write
    their own /proc entries (CUDA names its threads there) without letting a root job write a
    sysctl, sysrq-trigger or a driver's file. True when all of them are read-only."""
    locked = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC  # a remount in a user namespace must keep these
    for name in os.listdir("/proc"):
        path = os.path.join("/proc", name)
        if name.isdigit() or os.path.islink(path):
            continue
        p = path.encode()
        if (_libc.mount(p, p, None, _MS_BIND | _MS_REC, None) != 0 or _libc.mount(
                None, p, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | locked, None) != 0):
            return False
    return True


SHM_DEFAULT_BYTES = 1 << 30  # a job without a memory limit still gets a bounded /dev/shm


def _private_shm(size_bytes):
    """A fresh tmpfs on /dev/shm: what a job writes there is gone with its mount namespace, and
    never more than size_bytes (0: SHM_DEFAULT_BYTES)."""
    if not os.path.isdir("/dev/shm"):
        return
    opts = "size=%d,mode=1777" % (size_bytes or SHM_DEFAULT_BYTES)
    _call(_libc.mount(b"tmpfs", b"/dev/shm", b"tmpfs", _MS_NOSUID | _MS_NODEV, opts.encode()),
          "mount a private /dev/shm")


def _read_only_flags(path):
    """The flags that remount the bind mount at `path` read-only: nosuid and nodev added, and
    noexec and the access-time mode kept as the mount has them (in a user namespace a remount
    that clears a flag the source mount has is refused; noexec is not added: Python and ptxas
    run from the folders bound back)."""
    have = os.statvfs(path).f_flag
    flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV
    flags |= _MS_NOEXEC if have & os.ST_NOEXEC else 0
    flags |= _MS_NODIRATIME if have & os.ST_NODIRATIME else 0
    if have & os.ST_NOATIME:
        flags |= _MS_NOATIME
    elif not have & os.ST_RELATIME:  # without either flag the kernel would make it relatime
        flags |= _MS_STRICTATIME
    return flags


def _bind_back(folder, binds):
    """Binds each of `binds` ((path, read_only), sorted: a folder before what is in it) under
    `folder` back in, after `folder` is covered. They are opened before the folder is covered,
    then bound from their fds. Only folders and regular files: never a socket itself."""
    fds = []
    try:
        for k, read_only in binds:
            fds.append((k, read_only, os.open(k, os.O_PATH | os.O_CLOEXEC)))
        _call(_libc.mount(b"tmpfs", folder.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC,
                          b"size=64k,mode=0755"), "hide %s" % folder)
        for k, read_only, fd in fds:
            source = "/proc/self/fd/%d" % fd
            if os.path.isdir(source):
                os.makedirs(k, exist_ok=True)
            elif os.path.isfile(source):
                os.makedirs(os.path.dirname(k), exist_ok=True)
                open(k, "a").close()
            else:
                continue
            _call(_libc.mount(source.encode(), k.encode(), None, _MS_BIND | _MS_REC, None),
                  "keep %s" % k)
            if read_only:
                _call(_libc.mount(None, k.encode(), None, _read_only_flags(k), None),
                      "keep %s read-only" % k)
    finally:
        for _, _, fd in fds:
            os.close(fd)
    _call(_libc.mount(None, folder.encode(), None, _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV
                      | _MS_NOEXEC, b"size=64k,mode=0755"), "hide %s read-only" % folder)


def _hide(paths, kept=(), kept_read_only=()):
    """Covers each path that exists (not a symbolic link: the path it points to is covered in
    its own right) with an empty read-only file (a bind of /dev/null over a file or socket) or
    folder (a tmpfs). A path under another covered one is covered with it. A `kept` path under a
    covered folder is bound back in as it was, a `kept_read_only` one read-only (a path in both
    is kept writable)."""
    paths = [os.path.normpath(p) for p in paths]
    paths = [p for p in paths if not any(p.startswith(q.rstrip("/") + "/") for q in paths)]
    binds = {os.path.normpath(k): True for k in kept_read_only}
    binds.update((os.path.normpath(k), False) for k in kept)
    for path in dict.fromkeys(paths):
        try:
            st = os.lstat(path)
        except OSError:
            continue
        p = path.encode()
        if stat.S_ISDIR(st.st_mode):
            prefix = path.rstrip("/") + "/"
            _bind_back(path, sorted((k, ro) for k, ro in binds.items()
                                    if k.startswith(prefix) and os.path.exists(k)))
        elif stat.S_ISREG(st.st_mode) or stat.S_ISSOCK(st.st_mode):
            _call(_libc.mount(b"/dev/null", p, None, _MS_BIND, None), "hide %s" % path)
            _call(_libc.mount(None, p, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID
                              | _MS_NODEV | _MS_NOEXEC, None), "hide %s read-only" % path)


def _loopback_up():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        _, flags = _IFREQ.unpack(fcntl.ioctl(s, _SIOCGIFFLAGS, _IFREQ.pack(b"lo", 0)))
        fcntl.ioctl(s, _SIOCSIFFLAGS, _IFREQ.pack(b"lo", flags | _IFF_UP))


def _relay(pid):
    """The child between the worker and process 1: waits, then ends as process 1 ended."""
    os.closerange(3, os.sysconf("SC_OPEN_MAX") if os.sysconf("SC_OPEN_MAX") > 0 else 65536)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except ChildProcessError:
            os._exit(1)
        except InterruptedError:
            continue
    if os.WIFEXITED(status):
        os._exit(os.WEXITSTATUS(status))
    sig = os.WTERMSIG(status)
    signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
    os.kill(os.getpid(), sig)
    os._exit(128 + sig)


def enter(user, shm_bytes=0, hidden=(), kept=(), max_tasks=0, kept_read_only=()):
    """In a single-threaded child: from here on this code runs as process 1 of a new PID
    namespace with its own /proc, /dev/shm and network, the `hidden` paths covered but for the
    `kept` ones under them (bound back writable) and the `kept_read_only` ones (_hide) (the
    calling process stays behind as the relay and never returns).
    user: True to create a user namespace too (without CAP_SYS_ADMIN). shm_bytes: the size of
    the private /dev/shm (0: SHM_DEFAULT_BYTES). max_tasks: the job's allowance of tasks, capped
    hard through its namespace's pid_max where the kernel keeps one per namespace (task_cap)."""
    _unshare(user)
    pid = os.fork()
    if pid != 0:
        _relay(pid)
    global proc_guarded
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    _own_proc()
    _cap_tasks(max_tasks)  # before the sysctls are made read-only
    proc_guarded = _guard_proc()
    _private_shm(shm_bytes)
    _hide(hidden, kept, kept_read_only)
    _loopback_up()


PROC_NOT_GUARDED = 3  # probe's exit code: namespaces work, but /proc could not be made read-only


def probe(hidden=(), kept=(), kept_read_only=()):
    """"root", "user" or None: the kind of namespace a child can get here (tried in a child
    process, with the private /dev/shm and `hidden` covered, so the caller stays untouched), and
    the reason when none, or a note when the job's /proc could not be guarded (proc_guarded)."""
    reasons = []
    for user in (False, True):
        if not user and os.geteuid() != 0:
            continue
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                enter(user, hidden=hidden, kept=kept, kept_read_only=kept_read_only)
                alone = [p for p in os.listdir("/proc") if p.isdigit()] == ["1"]
                with socket.socket() as s:  # the loopback is up
                    s.bind(("127.0.0.1", 0))
                    s.listen(1)
                    socket.create_connection(s.getsockname(), timeout=5).close()
                code = 2 if os.getpid() != 1 or not alone else 0 if proc_guarded else PROC_NOT_GUARDED
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) in (0, PROC_NOT_GUARDED):
            note = None if os.WEXITSTATUS(status) == 0 else (
                "the job's /proc could not be made read-only outside its processes' folders")
            return ("user" if user else "root"), note
        reasons.append("%s namespaces refused" % ("user, PID, mount and network" if user else
                                                  "PID, mount and network"))
    return None, "; ".join(reasons) or "refused"
