"""The sandboxed children's seccomp filter:

  socket()          (unless the child has a network namespace of its own) fails with ENETUNREACH
                    for every address family but AF_UNIX and AF_NETLINK: no network
  io_uring_setup()  fails (ENETUNREACH): io_uring can open sockets without the socket call
  bpf()             fails with EPERM: kernel programs can read any process's memory

Needs no privilege (it sets no_new_privs first); installed right after fork, while the child
has one thread, it holds for every thread and process the child starts later. System calls of
another ABI (32-bit int 0x80, x32) fail too, so the filter cannot be stepped around through them;
nothing the evaluator runs uses them.
"""
import ctypes
import errno
import os
import platform

# machine -> (AUDIT_ARCH_*, __NR_socket, __NR_io_uring_setup, __NR_bpf)
_ARCHES = {"x86_64": (0xC000003E, 41, 425, 321), "aarch64": (0xC00000B7, 198, 425, 280)}
_X32_BIT = 0x40000000
_AF_UNIX, _AF_NETLINK = 1, 16

_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_OFF_NR, _OFF_ARCH, _OFF_ARG0 = 0, 4, 16  # struct seccomp_data (arg 0's low word: little-endian)
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2


class _Insn(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8),
                ("k", ctypes.c_uint32)]


class _Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Insn))]


def supported():
    return platform.machine() in _ARCHES


def _program(arch, nr_socket, nr_io_uring, nr_bpf, sockets):
    """Classic BPF; jump offsets count from the next instruction. sockets: leave socket() alone."""
    no_net = _RET_ERRNO | errno.ENETUNREACH
    program = [
        (_LD_W_ABS, 0, 0, _OFF_ARCH),
        (_JEQ_K, 1, 0, arch),
        (_RET_K, 0, 0, no_net),                       # another ABI
        (_LD_W_ABS, 0, 0, _OFF_NR),
        (_JGE_K, 0, 1, _X32_BIT),
        (_RET_K, 0, 0, no_net),                       # x32 system calls
        (_JEQ_K, 0, 1, nr_io_uring),
        (_RET_K, 0, 0, no_net),
        (_JEQ_K, 0, 1, nr_bpf),
        (_RET_K, 0, 0, _RET_ERRNO | errno.EPERM),
    ]
    if not sockets:
        program += [
            (_JEQ_K, 0, 4, nr_socket),                # any other call: allowed
            (_LD_W_ABS, 0, 0, _OFF_ARG0),
            (_JEQ_K, 2, 0, _AF_UNIX),
            (_JEQ_K, 1, 0, _AF_NETLINK),
            (_RET_K, 0, 0, no_net),
        ]
    return program + [(_RET_K, 0, 0, _RET_ALLOW)]


def install(sockets=False):
    """Installs the filter on the calling thread (and its future threads and children); with
    sockets=True socket() is left alone (a child whose network namespace is its own). Raises
    OSError where the kernel refuses, NotImplementedError on an unknown architecture."""
    if not supported():
        raise NotImplementedError("no system call filter for %s" % platform.machine())
    insns = _program(*_ARCHES[platform.machine()], sockets=sockets)
    table = (_Insn * len(insns))(*[_Insn(*i) for i in insns])
    prog = _Prog(len(insns), table)
    libc = ctypes.CDLL(None, use_errno=True)
    for args in ((_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0),
                 (_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0)):
        if libc.prctl(*args) != 0:
            e = ctypes.get_errno()
            raise OSError(e, "seccomp: %s" % os.strerror(e))
