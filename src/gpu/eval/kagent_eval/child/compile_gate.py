"""A candidate's Triton kernels compile while its process holds no GPU lease.

A candidate's first call compiles its Triton kernels: CPU work of up to seconds inside a trial,
which holds the device's lease shared. Another job's timing asks for the lease exclusive and
waits for every shared holder, so with several workers on a GPU each compile kept the GPU idle
and every other job waiting. So, while the process holds the lease shared, each compile (a miss
of Triton's in-memory kernel cache: JITFunction._do_compile, which may still find the kernel in
the disk cache) goes:

  1. wait for this process's GPU work to finish (nothing of it runs once the lease is given up),
     and give back the memory it caches where the GPU is short of it (child_common.gate's rule);
  2. announce the stage "compile_host": the worker gives the shared hold back (jobs.py; it never
     gives back an exclusive one, so a compile inside a timed stage keeps the lease);
  3. compile, on the CPU;
  4. stop at a gate_shared until the worker holds the lease shared again, then announce again the
     stage it was in; the kernel is launched only after that.

Nothing is launched while the lease is given up, and the compile runs exactly as it would have:
no state of the process differs from a compile under the lease. A candidate's own threads are
outside the lease here as everywhere (src/gpu/eval/README.md); a compile that starts while another
thread of the process is in step 3 compiles without a change of lease.
"""
import threading

from . import child_common

STAGE = "compile_host"


def install(ch, state, sync):
    """Wraps Triton's compile for this process (a spare's child, which has a gate); sync() waits
    for the process's GPU work. Returns a function that removes the wrapper, or None where there
    is no gate or no Triton to wrap."""
    if not state or state.get("gate") is None:
        return None
    try:
        from triton.runtime import jit
        cls = jit.JITFunction
        original = cls.__dict__["_do_compile"]
    except Exception:
        return None
    busy = threading.Lock()  # one thread at a time gives the lease up and takes it back

    def _do_compile(self, *args, **kwargs):
        if state.get("lease_mode") != child_common.SHARED or not busy.acquire(blocking=False):
            return original(self, *args, **kwargs)
        try:
            resume = getattr(ch, "last_stage", None)
            sync()
            child_common.give_back_memory(state)  # while the hold is still this process's
            state["lease_mode"] = None
            ch.stage(STAGE)
            try:
                return original(self, *args, **kwargs)
            finally:
                child_common.gate(state, child_common.SHARED)
                if resume:
                    ch.stage(resume)
        finally:
            busy.release()

    cls._do_compile = _do_compile

    def remove():
        cls._do_compile = original
    return remove
