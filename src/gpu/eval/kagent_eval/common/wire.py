"""Framed messages with raw array payloads between a sandboxed child and the worker.

The child is untrusted: the reader never unpickles, bounds every size, and accepts only a
whitelist of dtypes, so a hostile child can at worst send wrong numbers.
"""
import fcntl
import json
import os
import select
import struct
import time

import numpy as np

_HEADER = struct.Struct("<4sQ")
_MAGIC = b"KEV1"
MAX_HEADER_BYTES = 16 << 20
MAX_MESSAGE_BYTES = 4 << 30

# dtype name -> numpy dtype of the raw bytes (bfloat16 travels as its uint16 bit pattern)
_RAW = {
    "float64": np.float64, "float32": np.float32, "float16": np.float16,
    "bfloat16": np.uint16, "int64": np.int64, "int32": np.int32, "int16": np.int16,
    "int8": np.int8, "uint8": np.uint8, "bool": np.bool_,
}


# a child's frames carry million-element samples (4 MB a trial): a 1 MiB pipe (the default
# ceiling of /proc/sys/fs/pipe-max-size) moves them in a few reads instead of 64 KiB ones
PIPE_BYTES = 1 << 20


def pipe():
    """os.pipe(), widened to PIPE_BYTES where the system allows it."""
    rfd, wfd = os.pipe()
    try:
        fcntl.fcntl(wfd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except (OSError, AttributeError):
        pass  # a smaller pipe only means more reads
    return rfd, wfd


class WireError(Exception):
    pass


class Timeout(WireError):
    pass


class Closed(WireError):
    pass


def encode(obj, arrays=()):
    """obj: JSON-able dict; arrays: list of (dtype_name, shape, bytes-like)."""
    specs, blobs = [], []
    for name, shape, data in arrays:
        if name not in _RAW:
            raise WireError("dtype not allowed on the wire: %s" % name)
        mv = memoryview(data).cast("B")
        specs.append({"dtype": name, "shape": list(shape), "nbytes": mv.nbytes})
        blobs.append(mv)
    head = json.dumps({"obj": obj, "arrays": specs}).encode()
    total = len(head) + sum(b.nbytes for b in blobs)
    return [_HEADER.pack(_MAGIC, len(head)), head] + blobs, total


def send(fd, obj, arrays=()):
    parts, _ = encode(obj, arrays)
    for part in parts:
        view = memoryview(part).cast("B")
        while view.nbytes:
            n = os.write(fd, view)
            view = view[n:]


def _read_exact(fd, n, deadline):
    """n bytes (a bytearray, read in place: no chunks to join)."""
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise Timeout("timed out")
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            raise Timeout("timed out")
        k = os.readv(fd, [view[got:]])
        if not k:
            raise Closed("peer closed the pipe")
        got += k
    return buf


def to_numpy(spec, raw):
    """Array from its wire form; bfloat16 is widened to float32 exactly."""
    arr = np.frombuffer(raw, dtype=_RAW[spec["dtype"]]).reshape(spec["shape"])
    if spec["dtype"] == "bfloat16":
        arr = (arr.astype(np.uint32) << 16).view(np.float32)
    return arr


def recv(fd, deadline=None):
    """Next message as (obj, [numpy arrays]); raises Timeout, Closed or WireError."""
    magic, hlen = _HEADER.unpack(_read_exact(fd, _HEADER.size, deadline))
    if magic != _MAGIC or hlen > MAX_HEADER_BYTES:
        raise WireError("bad frame header")
    try:
        head = json.loads(_read_exact(fd, hlen, deadline))
        obj, specs = head["obj"], head["arrays"]
    except (ValueError, KeyError, TypeError) as e:
        raise WireError("bad frame: %s" % e)
    total, arrays = 0, []
    for spec in specs:
        name, shape, nbytes = spec.get("dtype"), spec.get("shape"), spec.get("nbytes")
        if name not in _RAW or not isinstance(shape, list) or not all(
                isinstance(d, int) and d >= 0 for d in shape):
            raise WireError("bad array spec")
        want = int(np.prod(shape, dtype=np.int64)) * np.dtype(_RAW[name]).itemsize
        total += want
        if nbytes != want or total > MAX_MESSAGE_BYTES:
            raise WireError("array size mismatch or too large")
        arrays.append(to_numpy(spec, _read_exact(fd, want, deadline)))
    return obj, arrays
