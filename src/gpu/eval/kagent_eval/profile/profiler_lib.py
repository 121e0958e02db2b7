"""libkagent_prof.so from Python: where it is, its ctypes view (one per process) and the activity
trace the timing's all-stream check reads. profiling.py builds the profiles on top of it.

``activity_trace(device_index) -> ActivityTrace``
    ``begin()``, ``mark()`` (host time on the records' clock, ns), ``stream_id(handle)`` (the
    records' id of a CUDA stream) and ``end() -> [record...]``:
    every kernel, copy and fill on any stream between begin and end, each with ``kind``,
    ``start_ns``, ``end_ns``, ``stream`` and ``name``. Raises ``ProfilerError(ENOTSUP)`` without
    the library. The timing's all-stream check uses it.
"""
import ctypes
import glob
import os

from .profiler_error import ProfilerError


_CODES = {1: "ENOTSUP", 2: "EPERM", 3: "EINVAL", 4: "ESTATE", 5: "ECUDA", 6: "ECUPTI", 7: "EBUSY"}
# this file is <root>/src/gpu/eval/kagent_eval/profile/ in a checkout, <prefix>/share/kagent-rt/eval/... installed
_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))


def library_candidates():
    """Where libkagent_prof.so may be: $KAGENT_PROF_LIB alone when set (so a test or a user can
    force the ncu fallback with a path that does not exist), else the project's build folders."""
    env = os.environ.get("KAGENT_PROF_LIB")
    if env:
        return [env]
    found = []
    patterns = ["build/src/gpu/profiler", "build*/src/gpu/profiler", "build*/**/profiler",
                ".devbuild/prof", "lib"]
    for pattern in patterns:
        found += sorted(glob.glob(os.path.join(_ROOT, pattern, "libkagent_prof.so"),
                                  recursive=True))
    return found


class Lib:
    """ctypes view of the C ABI; one per process."""

    def __init__(self, path):
        self.path = path
        self.dll = ctypes.CDLL(path)
        for name in ("kp_last_error", "kp_result"):
            getattr(self.dll, name).restype = ctypes.c_char_p
        self.dll.kp_profile_begin.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
        self.dll.kp_metrics_check.argtypes = [ctypes.c_char_p]
        self.dll.kp_profile_pass_end.argtypes = [ctypes.POINTER(ctypes.c_int)]
        self.abi = int(self.dll.kp_abi_version())
        if self.abi >= 3:
            self.dll.kp_timestamp.argtypes = [ctypes.POINTER(ctypes.c_ulonglong)]
            self.dll.kp_stream_id.argtypes = [ctypes.c_ulonglong, ctypes.POINTER(ctypes.c_uint)]
        self.device = None

    def call(self, name, *args):
        rc = getattr(self.dll, name)(*args)
        if rc != 0:
            msg = (self.dll.kp_last_error() or b"").decode(errors="replace")
            raise ProfilerError(_CODES.get(rc, "ECUPTI"), msg or "%s failed (%d)" % (name, rc))

    def result(self):
        import json
        return json.loads((self.dll.kp_result() or b"null").decode(errors="replace"))

    def init(self, device_index):
        if self.device != device_index:
            self.call("kp_init", int(device_index))
            self.device = device_index


_lib = None
_lib_error = None


def load_library():
    """The loaded library, or raises ProfilerError(ENOTSUP) saying where it looked."""
    global _lib, _lib_error
    if _lib is not None:
        return _lib
    if _lib_error is not None:
        raise _lib_error
    tried = []
    for path in library_candidates():
        try:
            _lib = Lib(path)
            return _lib
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    _lib_error = ProfilerError(
        "ENOTSUP", "libkagent_prof.so not loadable: " + ("; ".join(tried) or
                   "not built (set KAGENT_PROF_LIB or build with KAGENT_WITH_CUPTI)"))
    raise _lib_error


def torch_cuda(device_index):
    try:
        import torch
    except ImportError:
        raise ProfilerError("ENOTSUP", "torch is not installed")
    if not torch.cuda.is_available():
        raise ProfilerError("ENOTSUP", "no CUDA device (CPU mode): GPU profiling needs a GPU")
    if device_index >= torch.cuda.device_count():
        raise ProfilerError("EINVAL", "device %d not visible" % device_index)
    torch.cuda.set_device(device_index)
    torch.cuda.init()
    return torch


def ready(device_index):
    torch = torch_cuda(device_index)
    lib = load_library()
    lib.init(device_index)
    return torch, lib


class ActivityTrace:
    """Every piece of device work (kernels, copies, fills, on any stream, from any thread)
    between begin() and end(), with host marks on the records' own clock; the timing's
    all-stream check (``timing.py``) reads it."""

    def __init__(self, lib):
        self.lib = lib

    def begin(self):
        self.lib.call("kp_trace_begin")

    def mark(self):
        """Now, in ns on the clock of the records' start_ns/end_ns."""
        ns = ctypes.c_ulonglong(0)
        self.lib.call("kp_timestamp", ctypes.byref(ns))
        return ns.value

    def stream_id(self, handle):
        """The ``stream`` value records carry for a CUDA stream handle (``Stream.cuda_stream``)."""
        out = ctypes.c_uint(0)
        self.lib.call("kp_stream_id", ctypes.c_ulonglong(int(handle)), ctypes.byref(out))
        return out.value

    def end(self):
        """The records, in start order (the caller synchronizes the device first)."""
        self.lib.call("kp_trace_end")
        return self.lib.result()


def activity_trace(device_index=0):
    """An ActivityTrace, or raises ProfilerError(ENOTSUP) where the library cannot give one."""
    _, lib = ready(device_index)
    if lib.abi < 3:
        raise ProfilerError("ENOTSUP", "libkagent_prof ABI %d has no kp_timestamp (rebuild it)"
                            % lib.abi)
    return ActivityTrace(lib)
