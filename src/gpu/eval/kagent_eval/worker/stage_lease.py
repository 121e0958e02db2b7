"""What a candidate's process asks of the worker's GPU lease (lease.py) by the stages it announces
(worker side). Its own module so that the job (jobs.py) and the hardened re-measure (remeasure.py,
which job_gates.py calls from the job) follow a child's stages the same way without importing
each other."""
from ..child import child_candidate, compile_gate
from ..sandbox import sandbox
from .lease import SHARED


def follow_stage(lease, name):
    """What a spare's child asks of the worker's lease by announcing a stage; True when the child
    waits at a gate for the worker to open it. At a gate the worker gets the lease in that gate's
    mode. At "compile_host" the child compiles on the CPU with its GPU work finished and waits at
    a gate before it launches again (compile_gate.py), and at "gpu_done" its GPU work is over and
    it exits, so a shared hold is given back; an exclusive one never is: its timed stages may not
    be over."""
    if name in sandbox.GATE_MODES:
        lease.acquire(sandbox.GATE_MODES[name])
        return True
    if name in (compile_gate.STAGE, child_candidate.GPU_DONE) and lease.mode == SHARED:
        lease.release()
    return False
