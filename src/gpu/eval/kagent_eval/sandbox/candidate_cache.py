"""The candidates' compile cache, content-addressed (README.md "Sandbox").

Triton, TorchInductor, CUDA's JIT and whatever follows XDG_CACHE_HOME write where a candidate's
process points them. One cache shared by every candidate is a channel between jobs: a job read a
note another job left there (issue #53), and a job could plant a compiled file at the key another
kernel will ask for. So every entry belongs to the sources that made it:

    <the sandbox's candidate cache>/<sha256 of the problem's and candidates' sources, dtype>/

Before a candidate's process starts, the worker moves its job's entry (an empty one the first
time) into the job's folder as `cache` (a rename: both lie in the sandbox's private folder), and
the process's cache variables point there (jail.enter); it may write and read its job folder
only, so it sees its own sources' entry and nothing else. Once every process of the job is gone
the entry goes back under its key (jail.remove_job_dir), for the next job of the same sources:
a job asking for what it compiled before finds it. Two jobs of the same sources at once: the
second starts empty and what it made is dropped. Entries unused for MAX_AGE_S, and the least
recently used past MAX_BYTES in all, are removed (prune).

A spare (spare.py) prepares before its job is known: it gets a copy of the PREPARE entry (Triton's
driver and the warm-up kernel, made by spares before any candidate code ran in them), which
becomes the shared one where there is none when its job arrives (swap) and its job's entry takes
its place. The trusted children (reference, peaks) keep their own cache (jail.py).
"""
import hashlib
import os
import shutil
import stat
import time

from ..common.loader import source_of

FOLDER = "cache"  # in a job's folder
PREPARE = "prepare"
MAX_AGE_S = 7 * 86400
MAX_BYTES = 4 << 30
PRUNE_EVERY = 32  # entries given back between two prunes (and at the first)

_lent = {}  # job folder -> the key of the entry it holds
_given_back = [0]
_base = [None]  # the cache's folder, which jail.setup makes and names (use_base)


def use_base(path):
    """Where the entries live: jail.setup's per-user cache folder (jail imports this module, so
    it hands the folder down rather than being asked for it)."""
    _base[0] = path


def base():
    if _base[0] is None:  # every job folder is made by jail.new_job_dir, which sets the sandbox up
        raise RuntimeError("candidate_cache used before jail.setup(): no cache folder yet")
    return _base[0]


def folder_in(job_dir):
    return os.path.join(job_dir, FOLDER)


def key(spec):
    """The entry of a job: a hash of what makes its candidate's compiled files."""
    h = hashlib.sha256()
    names = [spec.get("problem"), spec.get("candidate")] + list(spec.get("candidates") or ())
    for name in names:
        text = source_of(name)[0] if isinstance(name, str) and name else ""
        h.update(b"%d:" % len(text.encode()) + text.encode())
    h.update(str(spec.get("dtype")).encode())
    return h.hexdigest()


def _real_dir(path):
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def lend(job_dir, spec=None):
    """Puts the entry of `spec` (None: a copy of the PREPARE entry) in the job's folder."""
    target = folder_in(job_dir)
    name = key(spec) if spec is not None else PREPARE
    entry = os.path.join(base(), name)
    if spec is None and _real_dir(entry):
        try:
            shutil.copytree(entry, target, symlinks=True)
        except (OSError, shutil.Error):
            remove_tree(target)
    elif spec is not None and _real_dir(entry):
        try:
            os.rename(entry, target)
        except OSError:
            pass  # another worker took it meanwhile
    if not _real_dir(target):
        os.mkdir(target, 0o700)
    _lent[job_dir] = name


def swap(job_dir, spec):
    """A spare's job arrived (no candidate code ran yet): its prepared entry goes back, the job's
    comes in."""
    give_back(job_dir)
    lend(job_dir, spec)


def give_back(job_dir):
    """Puts the job's entry back under its key; only once no process of the job is left."""
    name = _lent.pop(job_dir, None)
    if name is None:
        return
    target = folder_in(job_dir)
    entry = os.path.join(base(), name)
    if _real_dir(target):  # a candidate may have put a link in its place: then nothing goes back
        try:
            os.rename(target, entry)  # fails where another job's entry came back first: dropped
            os.utime(entry)
        except OSError:
            pass
    remove_tree(target)
    _given_back[0] += 1
    if _given_back[0] % PRUNE_EVERY == 1:
        prune()


def remove_tree(path):
    """Removes a folder whatever a candidate left in it (folders made unreadable; links are
    removed, never followed)."""
    if os.path.islink(path):
        os.unlink(path)
        return
    for dirpath, dirnames, _ in os.walk(path):
        for d in dirnames:
            p = os.path.join(dirpath, d)
            if not os.path.islink(p):
                try:
                    os.chmod(p, 0o700)
                except OSError:
                    pass
    shutil.rmtree(path, ignore_errors=True)


def _size(path):
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_blocks * 512
            except OSError:
                pass
    return total


def _entry_name(name):
    return name == PREPARE or (len(name) == 64 and all(c in "0123456789abcdef" for c in name))


def prune(now=None, max_age_s=MAX_AGE_S, max_bytes=MAX_BYTES):
    """Removes entries unused for max_age_s, then the least recently used ones past max_bytes,
    and anything else in the cache (the shared folders of evaluators before this one)."""
    now = time.time() if now is None else now
    root = base()
    entries = []
    for name in os.listdir(root):
        path = os.path.join(root, name)
        try:
            used = os.lstat(path).st_mtime
        except OSError:
            continue
        if not _entry_name(name) or not _real_dir(path) or now - used > max_age_s:
            remove_tree(path)
        else:
            entries.append((used, path))
    total = 0
    for used, path in sorted(entries, reverse=True):
        total += _size(path)
        if total > max_bytes:
            remove_tree(path)
