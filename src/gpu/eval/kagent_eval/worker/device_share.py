"""What the workers of one device in one pool share, so each is measured once per device: the
job seeds, the GPU's peaks and each problem's reference (its trials' outputs, FLOP count and
baselines). Without it every worker of a device ran its own reference and peaks, one after the
other under the exclusive lease, and a pool of four workers on a GPU took twice as long to start
as a pool of one.

A folder per (pool process, device) in the worker's private folder, outside what any child may
read or write (jail.share_root): <root>/shared/<pool pid>-<its start time>-<device>/. In it, under an advisory
lock per entry (flock), the first worker that needs an entry computes it and writes it; the
others wait on the lock and read it. Entries:

  seeds.json         {"sample_seed", "replay_seed"}: the reference's digests depend on both, so
                     the workers of a device use the same ones (a candidate learns them from its
                     own job anyway; they stay unknown before it runs)
  peaks.json         the peaks child's result
  <kind>-<hash>.kev  a reference child's messages (wire.py frames: JSON and raw arrays, never
                     pickle) of one kind: "trials" (trial and flops messages) or "base" (the
                     baselines message), the hash over the key the worker caches them by

Only workers started with --lease share (a device's only worker has no one to share with), and
only where the sandbox confines reads and writes (Landlock): otherwise a candidate could plant an
entry, or read the reference's output samples from one.
The device's last worker to stop removes the folder; folders of pools that died without that are
removed when a worker starts.
"""
import contextlib
import fcntl
import glob
import hashlib
import json
import os
import random
import re
import shutil

import numpy as np

from ..common import wire
from ..sandbox.sandbox import Outcome

KEEP_REFERENCES = 8  # reference entries kept per folder (each up to tens of MB of samples)


def _start_time(pid):
    """The process's start time in clock ticks (/proc/<pid>/stat field 22): with the pid, it
    names one process for good (a pid is reused, the pair is not)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _remove_stale(base):
    for path in glob.glob(os.path.join(base, "*-*-*")):
        pid, start = os.path.basename(path).split("-")[:2]
        if pid.isdigit() and _start_time(int(pid)) != start:
            shutil.rmtree(path, ignore_errors=True)


def open_for(device, pool_pid, sandbox_status, base):
    """The DeviceShare of this worker's device under base, or None where it must not share."""
    if sandbox_status.get("writes") != "landlock" or sandbox_status.get("reads") != "landlock":
        return None
    start = _start_time(pool_pid)
    if start is None:
        return None
    os.makedirs(base, 0o700, exist_ok=True)
    _remove_stale(base)
    name = "%d-%s-%s" % (pool_pid, start, re.sub(r"[^A-Za-z0-9_.]+", "_", str(device)))
    return DeviceShare(os.path.join(base, name))


def _without_arrays(value):
    """A message as the child sent it: the arrays the worker attached to its metas (digest
    attach_arrays) travel in the frame's array part, not in its JSON."""
    if isinstance(value, dict):
        return {k: _without_arrays(v) for k, v in value.items() if not isinstance(v, np.ndarray)}
    if isinstance(value, list):
        return [_without_arrays(v) for v in value]
    return value


class DeviceShare:
    def __init__(self, path):
        self.path = path
        os.makedirs(path, 0o700, exist_ok=True)
        # every live worker of the device holds this lock shared: the last one to leave, alone
        # able to take it exclusive, removes the folder (close)
        self._member = os.open(os.path.join(path, "members.lock"), os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self._member, fcntl.LOCK_SH)

    def close(self):
        """This worker leaves; the device's last worker removes the folder."""
        if self._member is None:
            return
        fd, self._member = self._member, None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            shutil.rmtree(self.path, ignore_errors=True)
        except OSError:
            pass  # another worker of the device is still alive
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def locked(self, name):
        """Holds the entry's lock (other workers of the device wait here) for the block."""
        fd = os.open(os.path.join(self.path, name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    def _write(self, name, data):
        tmp = os.path.join(self.path, ".%s.%d" % (name, os.getpid()))
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, os.path.join(self.path, name))  # readers see all of it or nothing

    def seeds(self):
        """{"sample_seed", "replay_seed"}, drawn by the device's first worker."""
        with self.locked("seeds"):
            path = os.path.join(self.path, "seeds.json")
            try:
                with open(path) as f:
                    got = json.load(f)
                if all(isinstance(got.get(k), int) for k in ("sample_seed", "replay_seed")):
                    return got
            except (OSError, ValueError, AttributeError):
                pass
            rng = random.SystemRandom()
            got = {"sample_seed": rng.randrange(1, 2 ** 31), "replay_seed": rng.randrange(1, 2 ** 31)}
            self._write("seeds.json", json.dumps(got).encode())
            return got

    def peaks(self, measure):
        """The device's peaks: read, or measured by measure() (a dict) and kept when it holds
        figures (an error is not kept: the next worker tries again)."""
        with self.locked("peaks"):
            path = os.path.join(self.path, "peaks.json")
            try:
                with open(path) as f:
                    return json.load(f)
            except (OSError, ValueError):
                pass
            res = measure()
            if isinstance(res, dict) and "error" not in res:
                self._write("peaks.json", json.dumps(res).encode())
            return res

    @staticmethod
    def entry(kind, key):
        return "%s-%s.kev" % (kind, hashlib.sha256(repr(key).encode()).hexdigest()[:32])

    def load(self, name):
        """An Outcome holding the entry's messages, or None where there is none."""
        try:
            fd = os.open(os.path.join(self.path, name), os.O_RDONLY)
        except OSError:
            return None
        out = Outcome()
        try:
            while True:
                try:
                    out.messages.append(wire.recv(fd))
                except wire.Closed:
                    break
        except wire.WireError:
            return None
        finally:
            os.close(fd)
        out.stage = "done"
        return out

    def store(self, name, messages):
        """Keeps messages [(obj, [numpy arrays])] as the entry; drops the oldest entries beyond
        KEEP_REFERENCES (a reader that has one open keeps reading it)."""
        chunks = []
        for obj, arrays in messages:
            parts, _ = wire.encode(_without_arrays(obj), [(a.dtype.name, a.shape, a.tobytes()) for a in arrays])
            chunks.extend(bytes(p) for p in parts)
        self._write(name, b"".join(chunks))
        kept = sorted(glob.glob(os.path.join(self.path, "*.kev")), key=os.path.getmtime)
        for old in kept[:-KEEP_REFERENCES]:
            try:
                os.unlink(old)
            except OSError:
                pass
