"""Capabilities a candidate run by root must not keep (dropped from its bounding, effective,
permitted, inheritable and ambient sets, so no program it starts gets them back):

  CAP_SYS_RESOURCE     would lift the memory limit (raise RLIMIT_DATA)
  CAP_SYS_PTRACE       reads the memory and environment of any process
  CAP_DAC_READ_SEARCH  opens files by handle, around path checks
  CAP_SYS_RAWIO        /dev/mem, raw I/O ports
  CAP_SYS_MODULE       loads kernel code
  CAP_BPF              kernel programs that read any memory (Linux >= 5.8)

CAP_SYS_ADMIN and CAP_PERFMON also let a process read any other's environment, so they go too,
unless the child is in namespaces of its own (where it sees no other process): then they stay,
because the NVIDIA driver asks for administrator rights before it shows performance counters to
a process where profiling is restricted to administrators (its default). src/gpu/eval/README.md
says what that leaves open and why an ordinary user is the stronger setup.
"""
import ctypes

DROPPED = {"CAP_DAC_READ_SEARCH": 2, "CAP_SYS_MODULE": 16, "CAP_SYS_RAWIO": 17,
           "CAP_SYS_PTRACE": 19, "CAP_SYS_RESOURCE": 24, "CAP_BPF": 39}
PROFILING = {"CAP_SYS_ADMIN": 21, "CAP_PERFMON": 38}
_PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
_VERSION_3 = 0x20080522


class _Header(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _Data(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def drop(keep_profiling):
    """Drops DROPPED (and PROFILING unless keep_profiling) from every set of the calling thread
    (and what it starts later)."""
    libc = ctypes.CDLL(None, use_errno=True)
    caps = list(DROPPED.values()) + ([] if keep_profiling else list(PROFILING.values()))
    for cap in caps:
        libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)  # EINVAL for a capability this kernel lacks
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header, data = _Header(_VERSION_3, 0), (_Data * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capget failed")
    for cap in caps:
        word, bit = data[cap // 32], ~(1 << (cap % 32)) & 0xFFFFFFFF
        word.effective &= bit
        word.permitted &= bit
        word.inheritable &= bit
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")
