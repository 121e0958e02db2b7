"""A control group per sandboxed child, where the machine lets the worker make them: the pids
controller caps how many tasks (processes and threads) a job may have, and the memory controller
counts all of its memory, shared maps, memfd and tmpfs pages included, which RLIMIT_DATA does not.

cgroup v1 (a hierarchy per controller): `<mount>/<the worker's group>/kagent-eval-<worker pid>/`.
cgroup v2 (one hierarchy): a group beside the worker's own, `<parent>/kagent-eval-<worker pid>/`,
where the parent hands the controller down; the worker's own group usually holds processes and so
cannot have child groups with controllers ("no internal processes"). Either needs write access to
the folder: root, or a delegated subtree.

The worker makes a group named after the job's folder under each base before a fork (`create`), the child moves itself
into it first thing (`join`), and the worker reads the group's event counters after the job
(`events`) and removes it (`remove`) once every process of the job is gone.
"""
import os
import time

CONTROLLERS = ("pids", "memory")
# per controller and cgroup version: the limit file, the event file and the counter in it that
# says the limit was hit, and the value meaning no limit
_FILES = {
    ("pids", 1): ("pids.max", "pids.events", "max", "max"),
    ("pids", 2): ("pids.max", "pids.events", "max", "max"),
    ("memory", 1): ("memory.limit_in_bytes", "memory.oom_control", "oom_kill", "-1"),
    ("memory", 2): ("memory.max", "memory.events", "oom_kill", "max"),
}


def _mounts():
    """(mount point, fstype, super options) of the cgroup file systems."""
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fstype, _, opts = (right.split() + ["", "", ""])[:3]
            if fstype in ("cgroup", "cgroup2"):
                found.append((left.split()[4], fstype, set(opts.split(","))))
    return found


def _own_groups():
    """{controller or "" (v2): the worker's group path}."""
    groups = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, names, path = line.rstrip("\n").split(":", 2)
            for name in names.split(",") if names else [""]:
                groups[name] = path
    return groups


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


def _read(path):
    with open(path) as f:
        return f.read()


def _v1_base(controller, mounts, groups):
    for point, fstype, opts in mounts:
        if fstype == "cgroup" and controller in opts and controller in groups:
            return os.path.join(point, groups[controller].lstrip("/"))
    return None


def _v2_parent(controller, mounts, groups):
    """The group under which this worker may make groups with `controller`, or None."""
    if "" not in groups:
        return None
    for point, fstype, _ in mounts:
        if fstype != "cgroup2":
            continue
        own = os.path.join(point, groups[""].lstrip("/"))
        try:
            if groups[""] == "/":  # the root group may hold processes and enable controllers
                if controller not in _read(os.path.join(own, "cgroup.subtree_control")).split():
                    _write(os.path.join(own, "cgroup.subtree_control"), "+" + controller)
                return own
            if controller in _read(os.path.join(own, "cgroup.controllers")).split():
                return os.path.dirname(own)
        except OSError:
            return None
    return None


class JobGroups:
    """The per-worker bases, one per controller that could be set up; `notes` says why any is
    missing."""

    def __init__(self, use=True):
        self.bases = {}  # controller -> (base folder, cgroup version)
        self.notes = {}  # controller -> why it is not available
        if not use:  # KAGENT_EVAL_CGROUPS=0: what a machine that delegates none gets
            self.notes = {c: "KAGENT_EVAL_CGROUPS=0" for c in CONTROLLERS}
            return
        try:
            mounts, groups = _mounts(), _own_groups()
        except OSError as e:
            self.notes = {c: "cannot read this process's cgroups (%s)" % e.strerror for c in CONTROLLERS}
            return
        name = "kagent-eval-%d" % os.getpid()
        for controller in CONTROLLERS:
            parent, version = _v1_base(controller, mounts, groups), 1
            if parent is None:
                parent, version = _v2_parent(controller, mounts, groups), 2
            if parent is None:
                self.notes[controller] = "no cgroup %s controller this user can delegate" % controller
                continue
            _remove_stale(parent)
            base = os.path.join(parent, name)
            try:
                os.makedirs(base, exist_ok=True)
                if version == 2:
                    _write(os.path.join(base, "cgroup.subtree_control"), "+" + controller)
                probe = os.path.join(base, "job-probe")
                os.mkdir(probe)
                try:
                    if not os.path.exists(os.path.join(probe, _FILES[controller, version][0])):
                        raise OSError(0, "no %s in a new group" % _FILES[controller, version][0])
                finally:
                    os.rmdir(probe)
            except OSError as e:
                self.notes[controller] = "cannot make a %s group under %s (%s)" % (
                    controller, parent, e.strerror or e)
                _rmdir_tree(base)
                continue
            self.bases[controller] = (base, version)

    def has(self, controller):
        return controller in self.bases

    def _job(self, controller, name):
        base, version = self.bases[controller]
        return os.path.join(base, name), version

    def create(self, name, limits):
        """Makes the job's groups with `limits` ({controller: value or None}, None: no limit)."""
        for controller, limit in limits.items():
            if controller not in self.bases:
                continue
            path, version = self._job(controller, name)
            os.makedirs(path, exist_ok=True)  # v2: one group holds both controllers
            limit_file, _, _, unlimited = _FILES[controller, version]
            _write(os.path.join(path, limit_file), str(limit) if limit else unlimited)

    def join(self, name):
        """In the child: moves the calling process into the job's groups (what it starts later
        is born there). Raises OSError if a group is gone: a job must not run outside them."""
        for controller in self.bases:
            path, _ = self._job(controller, name)
            _write(os.path.join(path, "cgroup.procs"), str(os.getpid()))

    def events(self, name):
        """{controller: how many times the job hit its limit} (0 where unknown)."""
        counts = {}
        for controller in self.bases:
            path, version = self._job(controller, name)
            _, event_file, counter, _ = _FILES[controller, version]
            counts[controller] = 0
            try:
                for line in _read(os.path.join(path, event_file)).splitlines():
                    key, _, value = line.partition(" ")
                    if key == counter:
                        counts[controller] = int(value)
            except (OSError, ValueError):
                pass
        return counts

    def event_file(self, name, controller="pids"):
        """The path of the job's event counters of `controller` (pids.events: "max N")."""
        path, version = self._job(controller, name)
        return os.path.join(path, _FILES[controller, version][1])

    def remove(self, name):
        for controller in self.bases:
            path, _ = self._job(controller, name)
            _rmdir_tree(path)

    def close(self):
        for base, _ in self.bases.values():
            _rmdir_tree(base)


def _rmdir_tree(path, tries=200):
    """Removes a group and its children (groups are removed with rmdir, never their files). A
    group whose last process has just been reaped can be busy for a moment: a few retries."""
    for _ in range(tries):
        try:
            for dirpath, dirnames, _ in sorted(os.walk(path), key=lambda w: -len(w[0])):
                os.rmdir(dirpath)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            time.sleep(0.005)
    return False


def _remove_stale(parent):
    """Bases of workers that died without removing theirs."""
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        if not name.startswith("kagent-eval-"):
            continue
        try:
            os.kill(int(name[len("kagent-eval-"):]), 0)
        except ValueError:
            continue
        except ProcessLookupError:
            _rmdir_tree(os.path.join(parent, name), tries=1)
        except PermissionError:
            pass
