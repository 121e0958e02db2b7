"""The sandbox every forked child enters (candidate, reference, peaks); README.md, "Sandbox".

Worker side: `setup()` once (probes what the kernel offers, makes the per-user folder),
`new_job_dir()` before each fork and `remove_job_dir()` after the child and its leftovers are gone.
Child side: `enter()` right after fork, while the child has one thread, and `narrow_reads()` once
the job's files are known.

  processes         PID, mount and network namespaces where the kernel allows them
                    (namespaces.py): nothing outside the job is visible or reachable, and all of
                    it dies with the job; else the worker is a subreaper and kills what a job
                    left (reaper.py)
  private folders   <base>/kagent-eval-<uid>/ (0700, owned by the user, else a fresh random one),
                    a `job-<worker pid>-<random>` folder per child (its HOME, TMPDIR and cwd), and
                    caches for Triton, TorchInductor, CUDA and the measured GPU peaks: the trusted
                    children's per user, which candidates cannot write; a candidate's the entry of
                    its sources, lent into its job folder (candidate_cache.py)
  process count     a pids cgroup per child (job_cgroup.py), else RLIMIT_NPROC in its user
                    namespace, or over its user's processes; a candidate that reaches it is
                    stopped at once, EPROCESSES (process_watch.py)
  memory            RLIMIT_DATA (private writable memory: heap, malloc'd mmaps); not RLIMIT_AS,
                    which counts the address space CUDA reserves and would break every GPU job;
                    and a memory cgroup per child where the machine gives one, which counts the
                    rest (shared maps, memfd, /dev/shm); oom_score_adj 1000 makes a child the
                    kernel's first choice when memory runs out
  /dev/shm          a private tmpfs within the memory limit, in its mount namespace; without
                    one the machine's, counted by the memory cgroup and swept after the job
                    (shm_sweep.py)
  writes            Landlock: the job folder, the caches, /dev/shm, the GPU's device files (ioctl
                    on no other device) and files under /proc (proc_writes)
  reads             Landlock, once the job is known: system folders but SECRET_PATHS, Python's,
                    the job's files; moves within the job and cache folders. SECRET_PATHS are
                    also covered in its mount namespace
  network           its own network namespace (loopback only), else a seccomp filter on
                    socket() (syscall_filter.py); AF_UNIX stays allowed (CUDA's start needs it)
  UNIX sockets      abstract ones: the network namespace, and Landlock's scope (ABI 6); by path
                    (no Landlock rule): its mount namespace covers /run, the temp and home folders
                    and binds back only what the job needs (job_view.py): no tmux server, agent or
                    daemon of the host is reachable; open without one (the ready line says so)
  signals           its PID namespace, and Landlock's scope (ABI 6): no signal outside the job
  root              a child run by root drops the capabilities that would undo the above
                    (capabilities.py)
"""
import atexit
import glob
import os
import resource
import stat
import sys
import tempfile

from . import candidate_cache, capabilities, job_cgroup, landlock, namespaces, sandbox_limits
from . import sandbox_status, shm_sweep, syscall_filter
from .job_view import FILE_FIELDS, SECRET_PATHS, View, readable
from .sandbox_limits import SandboxError
from ..common.loader import source_of
from ..profile import profiler_lib

SYSTEM_READ_ROOTS = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc", "/opt",
                     "/proc", "/sys", "/dev", "/run", "/snap", "/nix")
DEVICE_FILES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/nvidia*",
                "/dev/nvidia-caps")
OOM_SCORE_ADJ = "1000"
_state = None  # set by setup(); inherited by the children


def _private_dir(path):
    st = os.lstat(path)
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


def _user_root(base):
    """<base>/kagent-eval-<uid>, made 0700; a fresh unpredictable folder instead when that name is
    taken by anything but a private folder of this user (a symlink, another user's)."""
    path = os.path.join(base, "kagent-eval-%d" % os.getuid())
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    if _private_dir(path):
        return path, None
    fresh = tempfile.mkdtemp(prefix="kagent-eval-%d-" % os.getuid(), dir=base)
    return fresh, "%s is not a private folder of this user; using %s" % (path, fresh)


def _python_read_roots():
    cwd = os.getcwd()
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.realpath(sys.executable))}
    # the start folder (sys.path[0] under -m) is the user's, not Python's: left out
    roots.update(p for p in sys.path if p and os.path.isabs(p) and p != cwd and os.path.isdir(p))
    for name in ("LD_LIBRARY_PATH", "KAGENT_EVAL_READ_PATHS"):
        roots.update(p for p in os.environ.get(name, "").split(":") if os.path.isabs(p))
    for name, value in os.environ.items():
        if name.startswith(("CUDA_", "TRITON_")) and os.path.isabs(value):
            roots.add(value)
    roots.update(os.path.dirname(p) for p in profiler_lib.library_candidates())  # the CUPTI profiler
    return sorted(roots)


def view(writable, files=()):
    """The job's mount namespace, `writable` and its `files` bound back (View.mount_args)."""
    return _state["view"].mount_args(writable, files)


def _remove_stale_jobs(root):
    """Job folders of workers that died without cleaning up."""
    for path in glob.glob(os.path.join(root, "job-*-*")):
        try:
            pid = int(os.path.basename(path).split("-")[1])
            os.kill(pid, 0)
        except ValueError:
            continue
        except ProcessLookupError:
            remove_job_dir(path)
        except PermissionError:
            pass


def setup(environ=os.environ):
    """Probes the kernel and makes the per-user folders; returns status() (the worker's ready
    line shows it). Raises SandboxError for bad settings."""
    global _state
    setting = environ.get("KAGENT_EVAL_SANDBOX", "auto")
    if setting not in ("auto", "0", "1"):
        raise SandboxError("KAGENT_EVAL_SANDBOX must be auto, 0 or 1, not %r" % setting)
    enabled = setting in ("1", "auto")
    memory = sandbox_limits.memory_limit_mb(environ) if enabled else 0
    procs = sandbox_limits.max_processes(environ) if enabled else 0
    base = environ.get("KAGENT_EVAL_SANDBOX_DIR") or tempfile.gettempdir()
    root, note = _user_root(base)
    caches = {}
    for role in ("candidate", "trusted"):
        caches[role] = os.path.join(root, "cache", role)
        os.makedirs(caches[role], 0o700, exist_ok=True)
    _remove_stale_jobs(root)
    missing = [note] if note else []
    abi = landlock.abi() if enabled else 0
    if enabled and abi < landlock.MIN_ABI:
        missing.append("Landlock ABI %d (need >= %d): writes and reads are not confined" % (
            abi, landlock.MIN_ABI))
        abi = 0
    python_roots = _python_read_roots()
    fs_view = View(environ, root, python_roots, SYSTEM_READ_ROOTS)
    namespace, why = None, "KAGENT_EVAL_NAMESPACES=0"
    if enabled and environ.get("KAGENT_EVAL_NAMESPACES", "1") != "0":
        namespace, why = namespaces.probe(**fs_view.mount_args(list(caches.values())))
    missing += [fs_view.note()] if namespace and fs_view.note() else []
    if enabled and not namespace:
        missing.append("no namespaces (%s): a candidate sees the machine's processes, and the "
                       "worker reaps what it leaves; /dev/shm is the machine's (what a job "
                       "leaves there is swept after it)" % why)
    if abi and os.geteuid() == 0 and (not namespace or why):
        missing.append("%s: only a child's own /proc entries are writable, so a process it "
                       "starts (compute-sanitizer's target, torch.compile's workers) cannot start "
                       "CUDA" % ("root, and " + why if namespace else "root without namespaces"))
    net = enabled and syscall_filter.supported()
    if enabled and not net:
        missing.append("no system call filter for this architecture: io_uring and bpf stay open%s"
                       % ("" if namespace else ", and so does the network"))
    if enabled and not namespace:
        missing.append("no mount namespace: a candidate can connect to any named UNIX socket its "
                       "user may open: the machine's daemons' (/run/...) and a user's own in the "
                       "temp folder or a home folder (a tmux server, which runs commands for it; "
                       "an ssh-agent, which signs for it)")
    groups, process_limit = None, None
    if enabled:
        groups = job_cgroup.JobGroups(use=environ.get("KAGENT_EVAL_CGROUPS", "1") != "0")
        atexit.register(groups.close)
        process_limit = sandbox_limits.process_limit(procs, groups, namespace)
        if procs and not process_limit:
            missing.append("root without a pids cgroup (%s): no limit on a job's processes"
                           % groups.notes.get("pids"))
        elif process_limit == "watch":
            missing.append(sandbox_limits.watch_note(groups.notes.get("pids"), procs))
        if memory and not groups.has("memory"):
            missing.append("no memory cgroup (%s): shared memory maps and memfd are not counted "
                           "against the memory limit%s" % (groups.notes.get("memory"), "" if namespace
                                                           else ", nor is /dev/shm"))
        if not landlock.scopes(abi) and not namespace:
            missing.append("Landlock ABI %d (scopes need %d) and no namespaces: a candidate can "
                           "signal other processes of its user and connect to abstract UNIX "
                           "sockets" % (abi, landlock.SCOPES_ABI))
    _state = {"enabled": enabled, "root": root, "caches": caches, "landlock": abi, "net": net,
              "namespaces": namespace, "memory_mb": memory, "groups": groups,
              "process_limit": process_limit, "max_processes": procs, "shm_before": {},
              "read_roots": list(SYSTEM_READ_ROOTS) + python_roots, "view": fs_view,
              "missing": missing}
    candidate_cache.use_base(caches["candidate"])
    if not enabled:
        missing.append("KAGENT_EVAL_SANDBOX=%s: no confinement (private folders, allowed "
                       "environment and reaping only)" % setting)
    sandbox_status.require(environ.get("KAGENT_EVAL_REQUIRE", ""), status())
    return status()


def status():
    return sandbox_status.of(_state)


def process_watch_of(job_dir):
    """How the worker watches a candidate's job for its process limit (process_watch.py): (limit,
    the job's pids.events, None) under a pids cgroup; (limit, None, the task count of its
    namespace that reaches it) where it counts them; else None (no limit asked, or RLIMIT_NPROC
    over its user's tasks, which the worker cannot count apart)."""
    s = _state
    mode, limit = (s["process_limit"], s["max_processes"]) if s and s["enabled"] else (None, 0)
    if mode == "cgroup":
        return limit, s["groups"].event_file(os.path.basename(job_dir)), None
    if mode == "watch":  # root: nothing refuses past the limit
        return limit, None, limit + 1
    if mode == "rlimit" and s["namespaces"]:  # the relay counts in its user namespace too
        return limit, None, limit - 1
    return None


def share_root(name="shared"):
    """A folder of the workers' own in the private folder, outside every child's grants: what the
    workers of one device share ("shared", device_share.py: a candidate would find the reference's
    output samples there) and each GPU's host lease file ("gpu-lease", lease.HostLock)."""
    return os.path.join(_state["root"], name)


def memory_mb():
    return _state["memory_mb"] if _state else 0


def new_job_dir(role="candidate"):
    """A job folder, and the job's cgroups (named after it) with the limits of `role`."""
    if _state is None:  # a process other than the worker forking sandboxes (tests)
        setup()
    path = tempfile.mkdtemp(prefix="job-%d-" % os.getpid(), dir=_state["root"])
    groups = _state["groups"]
    if groups:
        limits = {"memory": _state["memory_mb"] << 20,
                  "pids": _state["max_processes"] if role == "candidate" else None}
        try:
            groups.create(os.path.basename(path), limits)
        except OSError as e:
            remove_job_dir(path)
            raise SandboxError("cannot make the job's cgroups: %s" % e)
    if _state["enabled"] and not _state["namespaces"]:  # its /dev/shm is the machine's
        _state["shm_before"][path] = shm_sweep.snapshot()
    return path


def remove_job_dir(path):
    """Removes a job folder whatever its candidate left in it (folders it made unreadable;
    symbolic links are removed, never followed). Only call it once no process of the job is
    left."""
    candidate_cache.give_back(path)  # the job's cache entry, for the next job of its sources
    candidate_cache.remove_tree(path)
    if _state and _state["groups"]:
        _state["groups"].remove(os.path.basename(path))
    before = _state["shm_before"].pop(path, None) if _state else None
    if before:
        for name, size in shm_sweep.sweep(*before):
            sys.stderr.write("kagent_eval: removed /dev/shm/%s (%d bytes) that a job left\n"
                             % (name, size))


def enter(role, job_dir, files=()):
    """In a child right after fork (one thread): its own namespaces, folder, environment and
    limits, then the write and network confinement, which then hold for every thread and process
    it starts. files: its job_files, bound back in its mount namespace (a spare's: staged).
    role "compile" (child_compile.py: the candidate's top level, run before its job holds the
    GPU's lease) is a candidate's with no GPU: none visible, no GPU device file writable."""
    s = _state
    gpu = role != "compile"
    if not gpu:
        role = "candidate"
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    if s["groups"]:
        s["groups"].join(os.path.basename(job_dir))  # before anything it starts: all of it counts
    # a candidate's cache is its sources' entry, lent into its folder (candidate_cache.py): no
    # rule of its own, which would follow the entry once it is given back
    cache = s["caches"]["trusted"] if role != "candidate" else candidate_cache.folder_in(job_dir)
    own = [cache] if role != "candidate" else []
    if s["namespaces"]:
        namespaces.enter(user=s["namespaces"] == "user", shm_bytes=(s["memory_mb"] or 0) << 20,
                         **(view([job_dir] + own, files) if s["enabled"] else {}),
                         max_tasks=s["max_processes"] if s["process_limit"] == "watch"
                         and role == "candidate" else 0)
    os.environ.update({
        "HOME": job_dir, "TMPDIR": job_dir, "TRITON_CACHE_DIR": os.path.join(cache, "triton"),
        "TORCHINDUCTOR_CACHE_DIR": os.path.join(cache, "inductor"),
        "CUDA_CACHE_PATH": os.path.join(cache, "nv"), "XDG_CACHE_HOME": os.path.join(cache, "xdg"),
        "KAGENT_CACHE_DIR": os.path.join(cache, "kagent"),  # measured GPU peaks (roofline.py)
        # load_inline's builds, a folder per call's sources, flags and versions (ext_build.py)
        "TORCH_EXTENSIONS_DIR": os.path.join(cache, "torch_extensions"),
        "PYTHONDONTWRITEBYTECODE": "1"})
    tempfile.tempdir = job_dir
    sys.dont_write_bytecode = True  # no .pyc beside the sources it imports: it may not write there
    os.chdir(job_dir)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write(OOM_SCORE_ADJ)
    except OSError:
        pass
    if not s["enabled"]:
        return
    if s["memory_mb"]:
        limit = s["memory_mb"] << 20
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    if s["process_limit"] == "rlimit" and role == "candidate":
        # in its own user namespace RLIMIT_NPROC counts the job's tasks only; without one, all of
        # its user's, so the job may add its allowance to those running now
        n = s["max_processes"] + (0 if s["namespaces"] else sandbox_limits.user_tasks())
        resource.setrlimit(resource.RLIMIT_NPROC, (n, n))
    if os.geteuid() == 0 and role == "candidate":
        capabilities.drop(keep_profiling=bool(s["namespaces"]))
    if s["net"]:
        syscall_filter.install(sockets=bool(s["namespaces"]))
    if s["landlock"]:
        handled = landlock.writes(s["landlock"])
        grants = [(p, handled) for p in [job_dir] + own] + [("/dev/shm", handled),
                  (proc_writes(), landlock.WRITE_FILE | landlock.TRUNCATE)]
        device = landlock.WRITE_FILE | landlock.TRUNCATE | landlock.IOCTL_DEV
        for pattern in DEVICE_FILES if gpu else [p for p in DEVICE_FILES if "nvidia" not in p]:
            grants += [(p, device) for p in glob.glob(pattern)]
        landlock.restrict(handled, grants, landlock.scopes(s["landlock"]))


def proc_writes():
    """Where under /proc a child may write. CUDA's start names its threads by opening
    /proc/<pid>/task/<tid>/comm with O_TRUNC (without both rights cuInit fails with error 304:
    bench/sandbox_layers.py), in every process that starts CUDA: the child and what it runs
    (compute-sanitizer's target, torch.compile's workers), whose pids are not known yet. So all
    of /proc where that is safe: the job's own /proc with its machine-wide files read-only, or a
    user that cannot write those anyway. Else only the child's own entries, and a process it
    starts cannot start CUDA."""
    if namespaces.proc_guarded or os.geteuid() != 0:
        return "/proc"
    return "/proc/self"


def job_files(spec):
    """The files a job names (job_view.FILE_FIELDS and its candidates, where they are paths
    rather than source text): what its children may read besides the system's, bound back into
    their view."""
    names = [spec.get(k) for k in FILE_FIELDS] + list(spec.get("candidates") or ())
    names += [p.get("source") for p in spec.get("parts") or () if isinstance(p, dict)]
    return [os.path.abspath(n) for n in names if isinstance(n, str) and n and source_of(n)[1]]


def staged(spec, job_dir):
    """`spec` as a spare is sent it (View.staged), where it has a mount namespace."""
    s = _state
    return s["view"].staged(spec, job_dir) if s and s["enabled"] and s["namespaces"] else spec


def narrow_reads(files=()):
    """In a child, before the job's code runs: reads (and program starts) only from the system
    and Python folders, its job folder, its cache and `files` (the problem, the candidate). Holds
    for the calling thread and what it starts later: a spare calls it after its preparation
    started threads, which keep reading what they could."""
    s = _state
    if not (s["enabled"] and s["landlock"]):
        return
    job_dir = tempfile.gettempdir()
    # Every ruleset denies moving a file to another folder unless it grants REFER there, handled
    # or not: without it here, Triton's and TorchInductor's cache writes (a file renamed into
    # place) fail with EXDEV; the write ruleset decides where moves may happen
    movable = landlock.READ | landlock.REFER
    grants = [(p, landlock.READ) for p in readable(s["read_roots"], SECRET_PATHS)]
    grants += [(p, movable) for p in (job_dir, s["caches"]["trusted"])]  # candidates': in job_dir
    grants += [(f, landlock.READ_FILE) for f in files or ()]
    landlock.restrict(movable, grants)


def limit_failure(job_dir, error_text=""):
    """(code, message) when the job ran into its process or memory limit, by its cgroups'
    counters (or, under RLIMIT_NPROC, by the error a refused fork or thread gives), else
    None. A job that hit a limit fails even if it went on."""
    s = _state
    if not s:
        return None
    hits = s["groups"].events(os.path.basename(job_dir)) if s["groups"] else {}
    refused = "Resource temporarily unavailable" in error_text or "can't start new thread" in error_text
    if hits.get("pids") or (s["process_limit"] == "rlimit" and refused):
        return ("EPROCESSES", "the job tried to run more than %d processes and threads at once "
                "(KAGENT_EVAL_MAX_PROCESSES)" % s["max_processes"])
    if hits.get("memory"):
        return ("EMEMORY", "the job ran out of its memory limit of %d MB (KAGENT_EVAL_MEMORY_MB; "
                "shared memory and /dev/shm count) and the kernel killed it" % s["memory_mb"])
    return None


def memory_failure(error_type, message):
    """A clear reason when a child's exception means it ran out of its memory limit, else None."""
    text = "%s: %s" % (error_type, message)
    low = text.lower()
    hit = error_type in ("MemoryError", "_ArrayMemoryError") or any(s in low for s in (
        "not enough memory", "can't allocate memory", "cannot allocate memory", "bad_alloc",
        "unable to allocate"))
    if not hit or "cuda" in low:
        return None
    limit = memory_mb()
    where = "its memory limit of %d MB" % limit if limit else "the machine's memory"
    return "the process ran out of %s (KAGENT_EVAL_MEMORY_MB): %s" % (where, text[:500])
