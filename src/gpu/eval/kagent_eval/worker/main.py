"""Evaluator worker: JSON lines on stdin/stdout, one job at a time.

    python3 -m kagent_eval.worker --device 0|GPU-<uuid>|MIG-<uuid>|cpu [--threads N]

torch (and triton, if present) are imported once here; the worker never initialises CUDA, so
forking a sandbox per job is safe and cheap. Only protocol lines reach stdout: fd 1 is pointed at
stderr at start and the protocol is written to a private copy of the original stdout.

Before anything else the worker keeps only the allowed environment (envpolicy): started with
more, it executes itself again with the allowed part, since the environment it was started with
stays in its memory, which every process it forks inherits and can read. It then makes itself
unreadable to other processes of its user (not dumpable: its /proc files belong to root), a child
subreaper (reaper), and sets up the sandbox (jail).
"""
import argparse
import ctypes
import json
import os
import signal
import sys
import time
import traceback

_PR_SET_DUMPABLE = 4
_PR_SET_PDEATHSIG = 1


def _stop(*_):
    """SIGTERM: leave the protocol loop, so the finally blocks kill the sandboxes and remove
    their folders; a second TERM must not cut that short."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise SystemExit(143)


def _harden():
    """Allowed environment, not dumpable, subreaper, SIGTERM as a clean exit; then the sandbox.
    Returns the sandbox status for the ready line."""
    from ..sandbox import envpolicy, jail, reaper
    clean = envpolicy.scrubbed(os.environ)
    if len(clean) != len(os.environ):
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, [sys.executable] + sys.orig_argv[1:], clean)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    reaper.become_subreaper()
    signal.signal(signal.SIGTERM, _stop)
    # the pool's process killed outright (kill -9) leaves no one to end the job: the worker gets
    # SIGTERM then and ends it (its sandboxes die with it), instead of running to a stage timeout
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != _STARTED_BY:
        _stop()  # the parent was already gone before the request took effect
    return jail.setup()


def _protocol_stream():
    proto_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    return os.fdopen(proto_fd, "w", buffering=1)


def _import_stack(cuda):
    import torch  # noqa: F401  (imported once so children start warm)
    triton_ver = None
    if cuda:
        try:
            import triton
            import triton.language  # noqa: F401
            import triton.testing  # noqa: F401
            triton_ver = triton.__version__
            from ..child import warmup
            warmup.parent()  # Triton's host-side start-up, once, before any sandbox is forked
        except Exception:
            triton_ver = None
    try:
        import torch.utils.flop_counter  # noqa: F401  (the roofline's FLOP counter; torch >= 2.1)
    except ImportError:
        pass
    import numpy  # noqa: F401
    from ..common import digest
    digest.fingerprint_weights()  # drawn once: every process forked from here shares them
    return torch, triton_ver


def _gpu_query(index, field):
    """A field of the GPU from nvidia-smi (which takes an index or a UUID), so the worker itself
    never touches CUDA; None where nvidia-smi gives none."""
    import subprocess
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=" + field, "--format=csv,noheader,nounits",
                              "-i", str(index)], capture_output=True, text=True, timeout=20)
        return (out.stdout.strip() or None) if out.returncode == 0 else None
    except Exception:
        return None


def _gpu_name(index):
    return _gpu_query(index, "name")


def _gpu_memory_bytes(index):
    """The GPU's total memory (nvidia-smi's memory.total, MiB), which the pool admits jobs by
    (kagent/gpu/admission.lua); None where nvidia-smi gives no number (a MIG device)."""
    mib = _gpu_query(index, "memory.total")
    try:
        return int(float(mib)) << 20
    except (TypeError, ValueError):
        return None


# the process that started this worker (the pool): its death ends the worker (_harden)
_STARTED_BY = os.getppid()


def main(argv=None):
    ap = argparse.ArgumentParser(prog="kagent_eval.worker")
    ap.add_argument("--device", default=os.environ.get("KAGENT_EVAL_DEVICE", "cpu"),
                    help="cpu, or the one GPU this worker uses as a CUDA_VISIBLE_DEVICES entry: an "
                         "index or a GPU-/MIG- UUID (the pool passes the UUID)")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch threads of a CPU-mode job (default 1: an intra-op thread pool on a "
                         "shared machine waits for its slowest thread, which makes timings noisy)")
    ap.add_argument("--log", default=None, help="append stderr (candidate output, tracebacks) here")
    ap.add_argument("--lease", action="store_true",
                    help="the GPU is shared with other workers: ask the pool for its lease, "
                         "shared around untimed GPU work and exclusive around each timed or "
                         "profiled phase (lease.py)")
    args = ap.parse_args(argv)
    from ..sandbox.jail import SandboxError
    try:
        sandbox_status = _harden()
    except SandboxError as e:
        sys.stderr.write("kagent_eval.worker: %s\n" % e)
        return 2
    if args.log:
        fd = os.open(args.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 2)
        os.close(fd)
    proto = _protocol_stream()

    cpu = args.device == "cpu"
    if not cpu:
        # one visible GPU per worker (replacing the mask it inherited, which the pool has read):
        # children use cuda:0 and cannot touch the others
        os.environ["CUDA_VISIBLE_DEVICES"] = str(args.device)
    torch, triton_ver = _import_stack(not cpu)
    threads = args.threads or (1 if cpu else None)
    if cpu:
        # the worker itself computes nothing with torch: keep its thread pool unstarted so
        # forked children can start their own safely
        torch.set_num_threads(1)
    from .. import __version__
    from . import ready_fields
    from .jobs import Evaluator
    from .lease import Lease
    device = "cpu" if cpu else "cuda:0"

    def reply(obj):
        proto.write(json.dumps(obj, default=_jsonable) + "\n")
        proto.flush()

    share = None
    if args.lease:  # the device's other workers are this pool's: one reference and peaks for all
        from ..sandbox import jail
        from . import device_share
        share = device_share.open_for(args.device, _STARTED_BY, sandbox_status, jail.share_root())
    host = None
    if not cpu:  # the GPU's lease among this user's pools on this host (lease.HostLock)
        from ..sandbox import jail
        from .lease import HostLock
        host = HostLock(jail.share_root("gpu-lease"), args.device)  # no child keeps its fd
    ev = Evaluator(device, threads=threads,
                   lease=Lease(args.lease, reply, sys.stdin.readline, host), share=share)
    gpu_id = int(args.device) if args.device.isdigit() else args.device  # an index or a UUID
    ready = {"ready": True, "device": "cpu" if cpu else gpu_id, "mode": "cpu" if cpu else "cuda",
             "torch": torch.__version__, "triton": triton_ver, "pid": os.getpid(),
             "gpu_name": None if cpu else _gpu_name(args.device), "sandbox": sandbox_status,
             "gpu_memory_bytes": None if cpu else _gpu_memory_bytes(args.device),
             "version": __version__, "package": os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
             "lease": args.lease, "share": share.path if share is not None else None,
             **ready_fields.fields()}
    reply(ready)
    try:
        _serve(ev, reply, ready)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # stopping already: finish the clean-up
        ev.close()
        from ..sandbox import reaper
        reaper.sweep()
    return 0


class _Shutdown(Exception):
    """The shutdown op: leave the protocol loop once its reply is sent."""


def _ops(ready):
    """op name -> handler(ev, job) -> the reply's result. The job ops (job_spec.OPS_WITH) run
    through Evaluator.run; an op not here is a bad request."""
    from . import compare_op, sanitize_op
    from .job_spec import OPS_WITH

    def shutdown(ev, job):
        raise _Shutdown()

    def analyze(ev, job):
        from ..analyze import analyze  # imported by the first job that asks for it
        return analyze.handle(ev, job)

    ops = {"ping": lambda ev, job: dict(ready, time=time.time()),
           "shutdown": shutdown,
           "peaks": lambda ev, job: _peaks(ev),
           "compare": compare_op.run,
           "sanitize": sanitize_op.run,
           "analyze": analyze}
    for op in OPS_WITH:
        ops[op] = (lambda name: lambda ev, job: ev.run(name, job))(op)
    return ops


def _serve(ev, send, ready):
    from ..common.request import BadRequest
    ops = _ops(ready)

    def reply(obj):
        ev.lease.release()  # a job that failed while it held the lease gives it back first
        send(obj)

    for line in iter(sys.stdin.readline, ""):
        line = line.strip()
        if not line:
            continue
        try:
            req = json.loads(line)
        except ValueError as e:
            reply({"id": None, "ok": False, "error": "EPARSE: %s" % e, "code": "EPARSE"})
            continue
        rid, op = req.get("id"), req.get("op")
        ev.lease.begin(rid)
        handler = ops.get(op) if isinstance(op, str) else None
        try:
            if handler is None:
                raise BadRequest("unknown op %r" % (op,))
            reply({"id": rid, "ok": True, "result": handler(ev, req.get("job"))})
        except _Shutdown:
            reply({"id": rid, "ok": True, "result": {}})
            break
        except BadRequest as e:
            reply({"id": rid, "ok": False, "error": "EBADREQ: %s" % e, "code": "EBADREQ"})
        except Exception as e:
            sys.stderr.write(traceback.format_exc())
            reply({"id": rid, "ok": False, "error": "EWORKER: %s: %s" % (type(e).__name__, e),
                   "code": "EWORKER"})


def _peaks(ev):
    if not ev.cuda:
        return {"ok": True, "device": ev.device, "note": "CPU mode: no GPU peaks"}
    res = ev.refs.device_peaks()
    if "error" in res and "dram_bytes_per_s" not in res:
        return {"ok": False, "error": res["error"]}
    return dict(res, ok=True)


def _jsonable(obj):
    try:
        import numpy as np
        if isinstance(obj, np.generic):
            return obj.item()
        if isinstance(obj, np.ndarray):
            return obj.tolist()
    except Exception:
        pass
    return str(obj)


if __name__ == "__main__":
    sys.exit(main())
