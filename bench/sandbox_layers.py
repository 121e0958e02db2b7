#!/usr/bin/env python3
"""Which layer of the candidate sandbox a GPU process can live under: for each layer alone
(and all of them, as `jail.enter` applies them), a forked child enters it, then creates a CUDA
context and runs one kernel. Before CUDA, a new thread names itself through /proc/thread-self/comm
(as CUDA's start does). Prints one line per layer: ok, or the error. The `writes...` layers are
Landlock's write rule with one more place writable each, and with one right left unhandled each:
the layers that pass say what CUDA needs to write.

    python3 bench/sandbox_layers.py
"""
import glob
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "src", "gpu", "eval"))


def try_cuda(torch):
    torch.cuda.init()
    x = torch.ones(1 << 20, device="cuda")
    torch.cuda.synchronize()
    return "ok: %d device(s), sum %.0f" % (torch.cuda.device_count(), float(x.sum()))


def try_comm():
    """A new thread names itself through /proc, as CUDA's start does."""
    import threading
    out = []

    def name_self():
        try:
            with open("/proc/thread-self/comm", "w") as f:  # O_TRUNC, as CUDA opens it
                f.write("kagent-probe")
            out.append("comm ok")
        except OSError as e:
            out.append("comm %s" % e.strerror)
    t = threading.Thread(target=name_self)
    t.start()
    t.join()
    # and in a process the child starts, as compute-sanitizer's target and torch.compile's
    # workers start CUDA
    code = ("import sys, threading\nerr = ['not run']\ndef f():\n    try:\n"
            "        open('/proc/thread-self/comm', 'w').write('x')\n        err[0] = None\n"
            "    except OSError as e:\n        err[0] = e.strerror\n"
            "t = threading.Thread(target=f)\nt.start()\nt.join()\nsys.exit(err[0])")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    out.append("comm in a child process %s" % (
        "ok" if proc.returncode == 0 else proc.stderr.strip().splitlines()[-1][:80]))
    return ", ".join(out)


def main():
    import resource
    import torch
    from kagent_eval.sandbox import jail, landlock, namespaces, sandbox_limits, syscall_filter
    status = jail.setup()
    print("status:", status, flush=True)
    job = jail.new_job_dir()
    abi = landlock.abi()
    print("kernel %s, Landlock ABI %d, device files: %s" % (
        os.uname().release, abi, " ".join(sorted(glob.glob("/dev/nvidia*")))), flush=True)
    handled = landlock.writes(abi)
    device = landlock.WRITE_FILE | landlock.TRUNCATE | landlock.IOCTL_DEV
    devices = [(p, device) for pattern in jail.DEVICE_FILES for p in glob.glob(pattern)]
    proc = [("/proc", landlock.WRITE_FILE | landlock.TRUNCATE)]
    base = [(job, handled), ("/dev/shm", handled)] + devices

    def writes_with(extra, rights=handled, scoped=0, grants=None):
        grants = base if grants is None else grants
        return lambda: landlock.restrict(rights, [(p, r & rights) for p, r in grants + extra], scoped)

    def ns_then(extra):
        def apply():
            namespaces.enter(user=False)
            writes_with(extra)()
        return apply

    layers = {
        "none": lambda: None,
        "rlimit_data_half": lambda: resource.setrlimit(
            resource.RLIMIT_DATA, ((sandbox_limits.memory_limit_mb() << 20),) * 2),
        "namespaces": lambda: namespaces.enter(user=False),
        # the job's filesystem view: secrets and socket folders covered, what it needs bound back
        "namespaces+shm+hidden": lambda: namespaces.enter(user=False, shm_bytes=sandbox_limits.memory_limit_mb() << 20,
                                                          **jail.view([job])),
        "seccomp": lambda: syscall_filter.install(sockets=False),
        "landlock_reads": lambda: jail.narrow_reads(()),
        # the write rule and the places CUDA might need to write (which one it is decides the fix)
        "writes": writes_with([]),
        "writes+root": writes_with([("/", handled)]),
        "writes+/proc/self(w)": writes_with([("/proc/self", landlock.WRITE_FILE)]),
        "writes+/proc/self(wt)": writes_with([("/proc/self", landlock.WRITE_FILE | landlock.TRUNCATE)]),
        "writes+/proc(wt)": writes_with(proc),
        # the write rule grants ioctl on device files (ABI 5) on the GPU's files only, as
        # jail.enter does; here on no device at all (CUDA is expected to fail: it is the
        # control that shows the grant is what lets CUDA's ioctls through)
        "writes+/proc(wt),no-ioctl": writes_with(proc, grants=[(p, r & ~landlock.IOCTL_DEV) for p, r in base]),
        "writes+/proc(wt),scopes": writes_with(proc, scoped=landlock.scopes(abi)),
        "writes+/dev": writes_with([("/dev", handled)]),
        "writes+/tmp": writes_with([("/tmp", handled)]),
        "ns,writes+/proc/self(wt)": ns_then([("/proc/self", landlock.WRITE_FILE | landlock.TRUNCATE)]),
        "all (trusted)": lambda: jail.enter("trusted", job),
        "all (candidate)": lambda: jail.enter("candidate", job),
    }
    for bit in range(16):  # each write right left unhandled in turn: which one CUDA needs
        right = 1 << bit
        if handled & right:
            layers["writes-right-%d" % bit] = writes_with([], handled & ~right)
    for name, apply in layers.items():
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            comm = "comm not tried"
            try:
                apply()
                comm = try_comm()
                msg = comm + "; " + try_cuda(torch)
            except BaseException as e:
                msg = "%s; FAIL %s: %s" % (comm, type(e).__name__, str(e)[:300])
            os.write(w, msg.encode())
            os._exit(0)
        os.close(w)
        out = b""
        while True:
            chunk = os.read(r, 4096)
            if not chunk:
                break
            out += chunk
        os.waitpid(pid, 0)
        print("%-26s %s" % (name, out.decode() or "(child died)"), flush=True)
    jail.remove_job_dir(job)
    return 0


if __name__ == "__main__":
    sys.exit(main())
