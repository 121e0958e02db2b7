"""GPU memory of a job: what its reference and candidate processes allocated at their peak, the
budget the pool admitted the job with, and the sizes in a CUDA out-of-memory error.

The pool admits a job onto a GPU by its problem's measured peak (kagent/gpu/admission.lua,
README.md "GPU memory"); the evaluator reports the figures and keeps its own adaptive buffers
(the timed input sets, the fresh-input probe's copies) inside the job's budget, so that the jobs
admitted together fit beside each other. It never decides whether an out-of-memory error is the
kernel's: only the pool knows whether the job had the GPU to itself.
"""
import re

# the job's budget in bytes, set once per candidate process from its spec (set_budget); None:
# the job was admitted alone (or the pool gives no budget) and may use what the GPU has free
_budget = None

_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
_SIZE = r"([0-9.]+) (B|KiB|MiB|GiB|TiB)"
# torch >= 2.1: "Tried to allocate 8.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which
# 5.36 GiB is free."; older: "Tried to allocate 8.00 GiB (GPU 0; 79.19 GiB total capacity; ...;
# 5.36 GiB free; ...)"
_TRIED = re.compile(r"Tried to allocate " + _SIZE)
_TOTAL = (re.compile(r"total capacity of " + _SIZE), re.compile(_SIZE + r" total capacity"))
_FREE = (re.compile(r"of which " + _SIZE + r" is free"), re.compile(_SIZE + r" free"))


def set_budget(nbytes):
    global _budget
    _budget = int(nbytes) if nbytes else None


def free_bytes(torch):
    """The GPU memory this process may still take: what the GPU has free and what torch's
    allocator keeps cached for this process (it reuses that first), and no more than its job's
    budget less what this process's tensors hold."""
    free, _ = torch.cuda.mem_get_info()
    if _budget is None:
        return free
    held = torch.cuda.memory_allocated()
    cached = max(0, torch.cuda.memory_reserved() - held)
    return max(0, min(free + cached, _budget - held))


def peak_bytes(torch, device):
    """The most this process's tensors held at once on the GPU (torch's allocator), or None on
    the CPU."""
    if not device.startswith("cuda"):
        return None
    return int(torch.cuda.max_memory_allocated())


def _size(match):
    return int(float(match.group(1)) * _UNITS[match.group(2)]) if match else None


def _first(patterns, text):
    for p in patterns:
        m = p.search(text)
        if m:
            return m
    return None


def out_of_memory(text):
    """{tried_bytes, free_bytes, total_bytes} (each None where the message lacks it) when `text`
    tells of a CUDA allocation that failed, else None."""
    if not isinstance(text, str) or not ("CUDA out of memory" in text or "OutOfMemoryError" in text):
        return None
    return {"tried_bytes": _size(_TRIED.search(text)), "free_bytes": _size(_first(_FREE, text)),
            "total_bytes": _size(_first(_TOTAL, text))}
