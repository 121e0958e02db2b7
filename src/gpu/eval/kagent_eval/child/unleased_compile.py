"""TorchInductor compiles with the GPU's lease given up, in the trusted children that compile a
whole model: the reference's torch.compile baseline (child_reference.py, under the lease
exclusive) and the analysis of kind "inductor" (inductor_kernel.py, shared).

Inductor's compile is CPU work: lowering, code generation, Triton compiles in its worker
processes. For a Level 3 model it takes minutes (an LSTM unrolled over its sequence ran past
eight), and with the lease held all that time every other job on the GPU, of this pool and of
the other pools on the host (lease.HostLock), waited for it: in a sweep of several runs per GPU
one such compile held all four GPUs of a host idle for nine minutes. So the child compiles through
backend(): Inductor's own backend (what torch.compile(model) uses), around which

  1. the child's GPU work so far is finished;
  2. it announces the stage "compile_unleased": the worker gives back whatever it holds (follow);
  3. Inductor compiles the graph, on the CPU;
  4. the child stops at a gate until the worker holds the lease again in the mode the child
     works in, then announces again the stage it was in; the compiled graph runs only after that.

Only where nothing of the compile itself runs on the GPU: not max-autotune, whose compile times
its candidate kernels (those compiles keep the lease). A child without a gate (a reference run
again alone on the GPU after it ran out of memory) compiles under the lease it holds.
"""
from ..sandbox import sandbox

STAGE = "compile_unleased"


def backend(torch, ch, mode):
    """A torch.compile backend: Inductor's, its compile run with the lease given up where ch has
    a gate. mode: the lease mode ("shared" or "exclusive") the child takes back after it."""
    from torch._dynamo.backends.registry import lookup_backend
    inductor = lookup_backend("inductor")
    if getattr(ch, "gate_fd", None) is None:
        return inductor

    def compile_unleased(gm, example_inputs, **kwargs):
        resume = ch.last_stage
        torch.cuda.synchronize()
        ch.stage(STAGE)
        try:
            return inductor(gm, example_inputs, **kwargs)
        finally:
            ch.gate(mode)
            if resume:
                ch.stage(resume)
    return compile_unleased


def follow(lease):
    """The worker's side, sandbox.run_child's gate: at "compile_unleased" the lease is given back
    (shared or exclusive: the child's GPU work is finished and nothing of it is timed); at a gate
    it is taken in that gate's mode, and the child is let go on (True)."""
    def gate(name):
        if name == STAGE:
            lease.release()
            return False
        if name in sandbox.GATE_MODES:
            lease.acquire(sandbox.GATE_MODES[name])
            return True
        return False
    return gate
