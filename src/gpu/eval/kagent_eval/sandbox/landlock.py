"""Landlock (Linux >= 5.13, ABI >= 2 used here) through its three system calls, for the sandboxed
children: an unprivileged process confines its own file access, and the confinement holds for
root too and for everything the process starts later.

A ruleset names the rights it *handles*; each handled right is then denied everywhere except
beneath the folders (or on the files) a rule grants it for. Rulesets stack: a second
`restrict()` can only take rights away. A Landlock domain also stops the process from reading
the memory or the `/proc/<pid>/environ` of any process outside its domain (ptrace access
checks), whatever its user.

ABI 1 is not used: it forbids every rename across folders, which Triton's cache relies on.
ABI 5 adds the right to use ioctl on device files (IOCTL_DEV), ABI 6 scopes: a process in a
scoped domain cannot connect to an abstract UNIX socket, nor signal a process, outside its domain.
"""
import ctypes
import errno
import os
import stat

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446  # the same on every arch
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE = 1 << 13, 1 << 14  # ABI 2, ABI 3
IOCTL_DEV = 1 << 15  # ABI 5
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6
IOCTL_DEV_ABI, SCOPES_ABI = 5, 6

READ = EXECUTE | READ_FILE | READ_DIR
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # the rights a rule on a file may carry
MIN_ABI = 2


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64)]


class _ScopedRulesetAttr(ctypes.Structure):  # ABI >= 6
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc = ctypes.CDLL(None, use_errno=True)


def abi():
    """The kernel's Landlock ABI version, or 0 where Landlock is missing, disabled or filtered."""
    n = _libc.syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0),
                      ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return n if n > 0 else 0


def writes(version):
    """Every right that changes the file system, as far as this ABI knows them."""
    rights = (WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_CHAR | MAKE_DIR | MAKE_REG | MAKE_SOCK
              | MAKE_FIFO | MAKE_BLOCK | MAKE_SYM | REFER)
    return (rights | (TRUNCATE if version >= 3 else 0)
            | (IOCTL_DEV if version >= IOCTL_DEV_ABI else 0))


def scopes(version):
    """The scopes this ABI knows (0 before ABI 6)."""
    return SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if version >= SCOPES_ABI else 0


def _check(ret, what):
    if ret < 0:
        e = ctypes.get_errno()
        raise OSError(e, "landlock %s: %s" % (what, os.strerror(e)))
    return ret


def restrict(handled, grants, scoped=0):
    """Confines the calling thread (and what it starts later) to `grants`, a list of
    (path, rights) for the `handled` rights, and to its own domain for the `scoped` scopes
    (ABI >= 6). Paths that do not exist are skipped. Raises OSError when the kernel refuses."""
    attr = _ScopedRulesetAttr(handled, 0, scoped) if scoped else _RulesetAttr(handled)
    ruleset = _check(_libc.syscall(SYS_CREATE_RULESET, ctypes.byref(attr),
                                   ctypes.c_size_t(ctypes.sizeof(attr)), ctypes.c_uint32(0)),
                     "create_ruleset")
    try:
        for path, rights in grants:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
                allowed = (rights if is_dir else rights & _FILE_RIGHTS) & handled
                if not allowed:
                    continue
                rule = _PathBeneath(allowed, fd)
                ret = _libc.syscall(SYS_ADD_RULE, ctypes.c_int(ruleset),
                                    ctypes.c_int(_RULE_PATH_BENEATH), ctypes.byref(rule),
                                    ctypes.c_uint32(0))
                if ret < 0 and ctypes.get_errno() not in (errno.ENOENT,):
                    _check(ret, "add_rule %s" % path)
            finally:
                os.close(fd)
        _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        _check(_libc.syscall(SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)),
               "restrict_self")
    finally:
        os.close(ruleset)
