#!/usr/bin/env python3
"""Which layer of the candidate sandbox a GPU process can live under: for each layer alone
(and all of them, as `jail.enter` applies them), a forked child enters it, then creates a CUDA
context and runs one kernel. Prints one line per layer: ok, or the error.

    python3 bench/sandbox_layers.py
"""
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "src", "gpu", "eval"))


def try_cuda(torch):
    torch.cuda.init()
    x = torch.ones(1 << 20, device="cuda")
    torch.cuda.synchronize()
    return "ok: %d device(s), sum %.0f" % (torch.cuda.device_count(), float(x.sum()))


def main():
    import resource
    import torch
    from kagent_eval import jail, landlock, namespaces, syscall_filter
    status = jail.setup()
    print("status:", status, flush=True)
    job = jail.new_job_dir()
    abi = landlock.abi()
    layers = {
        "none": lambda: None,
        "rlimit_data_half": lambda: resource.setrlimit(
            resource.RLIMIT_DATA, ((jail.memory_limit_mb() << 20),) * 2),
        "rlimit_data_8g": lambda: resource.setrlimit(resource.RLIMIT_DATA, ((8192 << 20),) * 2),
        "namespaces": lambda: namespaces.enter(user=False),
        "seccomp": lambda: syscall_filter.install(sockets=False),
        "landlock_writes": lambda: landlock.restrict(landlock.writes(abi), [
            (job, landlock.writes(abi)), ("/dev/shm", landlock.writes(abi))]
            + [(p, landlock.WRITE_FILE) for p in __import__("glob").glob("/dev/nvidia*")]),
        "landlock_reads": lambda: jail.narrow_reads(()),
        "all": lambda: jail.enter("trusted", job),
    }
    for name, apply in layers.items():
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                apply()
                msg = try_cuda(torch)
            except BaseException as e:
                msg = "FAIL %s: %s" % (type(e).__name__, str(e)[:300])
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
        print("%-18s %s" % (name, out.decode() or "(child died)"), flush=True)
    jail.remove_job_dir(job)
    return 0


if __name__ == "__main__":
    sys.exit(main())
