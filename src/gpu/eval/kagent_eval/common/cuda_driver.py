"""The CUDA driver calls the timer makes itself (ctypes, libcuda.so.1): what torch does not offer,
or offers only through a pool a candidate's process shares."""
import ctypes

_CU_STREAM_NON_BLOCKING = 0x1


def persisting_l2_reset():
    """cuCtxResetPersistingL2Cache, or None where it cannot be called."""
    try:
        fn = ctypes.CDLL("libcuda.so.1").cuCtxResetPersistingL2Cache
        fn.restype = ctypes.c_int
        return lambda: fn()
    except (OSError, AttributeError):
        return None


def own_stream(torch, device):
    """A stream of the harness's own on `device` (its primary context, torch's), for the untimed
    work between timed calls (timing.Timer.prep_stream).

    Not torch.cuda.Stream(): that hands out torch's pooled streams round robin (32 per
    priority), so a candidate that asks for enough streams gets the harness's, and the all-stream
    check excuses work on it between calls (stream_check.py). Not per timed loop either: the
    pool's first use creates its streams, driver calls that waited 0.1-0.45 s on the host's other
    GPUs inside the exclusive lease (docs/results/2026-11-28-gpu-g.md); a spare makes this one
    before its job."""
    fn = ctypes.CDLL("libcuda.so.1").cuStreamCreate
    fn.restype = ctypes.c_int
    handle = ctypes.c_void_p()
    with torch.cuda.device(device):  # makes the device's context current for the driver call
        rc = fn(ctypes.byref(handle), ctypes.c_uint(_CU_STREAM_NON_BLOCKING))
    if rc != 0 or not handle.value:
        raise RuntimeError("cuStreamCreate failed (CUresult %d)" % rc)
    return torch.cuda.ExternalStream(handle.value, device=device)
