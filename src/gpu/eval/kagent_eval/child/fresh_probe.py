"""The fresh-input probe of a candidate's benchmark (child_candidate.py): its fastest call on the
timed inputs against its fastest on fresh copies, which a result cache cannot hide (ECACHE,
timed_verdict.py)."""
from ..common import timed_inputs
from ..common.cache_rule import looks_cached


PROBE_CALLS = 5
PROBE_ROUNDS = 3
PROBE_MAX_BYTES = 2 << 30
# The first round's copies are made ahead of the exclusive lease only where they and one copy's
# temporary take at most this share of the GPU's free memory; else the probe makes them itself.
AHEAD_MEMORY_SHARE = 0.5


def _calls(nbytes):
    return max(2, min(PROBE_CALLS, PROBE_MAX_BYTES // max(1, nbytes)))


def fits_ahead(torch, device, nbytes, calls):
    """Whether `calls` copies of inputs of `nbytes`, and the temporary of the one being made,
    fit in AHEAD_MEMORY_SHARE of the GPU's free memory."""
    return timed_inputs.fits(torch, device, nbytes, calls + 1, AHEAD_MEMORY_SHARE)


def prepare(torch, args, device):
    """The first round's fresh copies of the timed inputs, made before the timed loop while the
    lease is still shared: making them (new allocations, a copy of every input) is GPU work that
    is not timed, and large allocations are driver calls that the host's other GPUs wait on
    (docs/results/2026-11-28-gpu-d.md). None where they do not fit beside the timed inputs: the
    probe then makes them itself. The candidate never sees them before the probe."""
    nbytes = timed_inputs.nbytes_of(torch, args)
    n = _calls(nbytes)
    if not fits_ahead(torch, device, nbytes, n):
        return None
    return [[fresh_values(torch, a, i + 1) for a in args] for i in range(n)]


def probe(torch, timer, cand, args, ahead=None):
    """Fastest call on the timed inputs and fastest call on fresh inputs: new addresses and new
    values (each floating input's values rotated by a random offset, so the distribution is the
    same and no value sits where it was).

    A result cache keyed by address or by content (or a fast path taken only on repeated inputs)
    makes every repeated call fast and every fresh one slow. Noise (a preempted call on a loaded machine)
    only ever adds time, so the minimum of several calls per side, interleaved so both sides see
    the same machine state, is what stays comparable. All copies are alive at once: freeing one
    would let the allocator hand its address to the next and turn a miss into a hit.
    ahead: the first round's copies, made by prepare() from an input set of the same timed loop
    (its values rotated as here), or None."""
    nbytes = timed_inputs.nbytes_of(torch, args)
    n = _calls(nbytes)
    mode = "cuda" if timer.cuda else "cpu"
    fresh, repeat, alive = [], [], []
    # A cache makes every round look the same; noise does not. So while the minima still look
    # like a cache, take another round with new copies (up to PROBE_ROUNDS, within the memory
    # budget) and pool the samples. Every copy stays alive, so no address is ever reused.
    for k in range(PROBE_ROUNDS):
        if k > 0 and (len(alive) + n) * nbytes > 2 * PROBE_MAX_BYTES:
            break
        if k == 0 and ahead:
            copies = ahead
        else:
            copies = [[fresh_values(torch, a, len(alive) + i + 1) for a in args] for i in range(n)]
        alive.extend(copies)
        with torch.no_grad():
            for c in copies:  # the larger of event and host time: work on a side stream counts too
                repeat.append(max(timer.time_once(lambda: cand(*args))))
                fresh.append(max(timer.time_once(lambda: cand(*c))))
        f, r = min(fresh), min(repeat)
        if not looks_cached(r, f, mode):
            break
    return {"fresh_ms": min(fresh), "repeat_ms": min(repeat), "n": len(fresh)}


def fresh_values(torch, value, k):
    """A copy of an input at an address the candidate has never seen; a floating one with its
    values rotated by an offset that differs per copy (integer inputs, such as indices, are
    copied as they are)."""
    if not isinstance(value, torch.Tensor):
        return value
    if not value.is_floating_point() or value.numel() < 2:
        return _at_unseen_address(torch, value)
    flat = value.reshape(-1)
    rolled = torch.roll(flat, shifts=1 + (k * 7919) % (flat.numel() - 1)).view(value.shape)
    return _at_unseen_address(torch, rolled)


# The allocator hands freed blocks back, so a plain copy can land where an earlier trial's input
# was, an address a cache keyed by address still holds. Blocks start aligned (64 bytes on the
# CPU; 512 in PyTorch's CUDA allocator, within allocations aligned to at least 256); a view this
# far into a buffer of its own starts where no block does, yet stays aligned for vector loads (a
# GPU cache line).
UNSEEN_OFFSET_BYTES = {"cpu": 32, "cuda": 128}


def _at_unseen_address(torch, value):
    offset = UNSEEN_OFFSET_BYTES["cuda" if value.is_cuda else "cpu"]
    pad = max(1, offset // value.element_size())
    buf = torch.empty(value.numel() + pad, dtype=value.dtype, device=value.device)
    out = buf[pad:].view(value.shape)
    out.copy_(value)
    return out
