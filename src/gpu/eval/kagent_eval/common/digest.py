"""Tensors to their wire form (child side): whole when small, else a seeded sample plus
whole-tensor statistics, so multi-GB outputs can be checked without copying them out."""
import functools
import math

import numpy as np

# above this a tensor travels as a sample: the worker's float64 comparison of a whole 256 MB
# output took seconds per trial
FULL_LIMIT_BYTES = 16 << 20
SAMPLE_COUNT = 1 << 20


@functools.lru_cache(maxsize=16)
def sample_positions(numel, seed, count=SAMPLE_COUNT):
    """Sorted, distinct flat indices: the first and last 1024 elements, and between them one
    seeded random element in each of `count` equal strata. Reference and candidate derive the
    same positions from the same seed. Strata come out sorted and distinct by construction, so
    no sort is needed: a draw of 1 Mi positions costs milliseconds, not the 0.1-0.2 s of a
    sorted random draw, in every fresh candidate process."""
    edge = min(1024, numel)
    inner = numel - 2 * edge
    if inner <= count:  # small tensors travel whole; this only guards direct callers
        return np.arange(numel, dtype=np.int64)
    rng = np.random.RandomState(seed % (2 ** 32))
    # each stratum is at least one element wide (inner > count), so picks never collide
    bounds = (np.arange(count + 1, dtype=np.float64) * (inner / count)).astype(np.int64)
    pick = bounds[:-1] + (rng.random_sample(count) * np.diff(bounds)).astype(np.int64)
    return np.concatenate([np.arange(edge, dtype=np.int64), edge + pick,
                           np.arange(numel - edge, numel, dtype=np.int64)])


def flatten_outputs(torch, out):
    """Every tensor in a (nested) tuple/list output, in order; non-tensors kept as values."""
    if isinstance(out, (tuple, list)):
        items = []
        for o in out:
            items.extend(flatten_outputs(torch, o))
        return items
    return [out]


def _dtype_name(torch, t):
    return str(t.dtype).replace("torch.", "")


def tensor_digest(torch, t, sample_seed, force_full=False):
    """(meta dict, wire arrays) for one tensor."""
    meta, flat = _elements(torch, t, sample_seed, force_full)
    flat = flat.cpu()
    wire_name = name = meta["dtype"]
    if name == "bfloat16":
        flat = flat.view(torch.int16)
    elif name == "bool":
        flat = flat.to(torch.uint8)
        wire_name = "uint8"
    arr = flat.numpy()
    return meta, [(wire_name, [arr.size], arr)]


def _elements(torch, t, sample_seed, force_full=False, sum_only=False):
    """(meta, flat) of one tensor: its digest's metadata with the whole-tensor statistics (only
    the sum with sum_only: all an input's digest is asked for), and the elements a digest
    covers, flat and contiguous on its device: all of them up to FULL_LIMIT_BYTES (or
    force_full), else the seeded sample."""
    name = _dtype_name(torch, t)
    meta = {"kind": "tensor", "dtype": name, "shape": list(t.shape),
            "plain": type(t) is torch.Tensor, "numel": t.numel()}
    # a subclass could compute lazily when read; read it as a plain tensor's storage
    base = t.as_subclass(torch.Tensor) if meta["plain"] is False else t
    base = base.detach()
    if base.is_complex():
        base = torch.view_as_real(base)
        meta["dtype"] = _dtype_name(torch, base)
    if base.numel():
        meta["stats"] = _stats(torch, base.reshape(-1), sum_only)
    full = force_full or base.numel() * base.element_size() <= FULL_LIMIT_BYTES
    flat = base.reshape(-1)
    if not full:
        flat = flat[_positions_on(torch, base.numel(), sample_seed, flat.device)]
    meta["full"] = full
    return meta, flat.contiguous()


@functools.lru_cache(maxsize=4)
def _positions_on(torch, numel, seed, device):
    """sample_positions as an index tensor on `device`: a process digests the same output shape
    on every call it is asked to (each trial, each timed call's sample), and copying 8 MB of
    positions to the GPU each time would cost more than the gather they serve."""
    return torch.from_numpy(sample_positions(numel, seed)).to(device)


STATS_CHUNK = 1 << 26  # elements per step: temporaries stay small beside a multi-GB tensor


def _stats(torch, flat, sum_only=False):
    """Whole-tensor sum, absolute sum and non-finite count, a chunk at a time (float64 sums);
    sum_only: the sum alone.

    The sums of every chunk are read back together, once: on a GPU each read waits for the
    device. The non-finite elements are counted only where the absolute sum is not finite: a
    finite float64 sum of absolute values has no NaN or infinity among its terms, and the count
    is then 0 without a pass of its own."""
    as_float = flat.is_floating_point()
    parts = []
    for start in range(0, flat.numel(), STATS_CHUNK):
        c = flat[start:start + STATS_CHUNK]
        if as_float and not sum_only:
            parts.append(torch.stack([c.sum(dtype=torch.float64),
                                      c.abs().sum(dtype=torch.float64)]))
        else:
            parts.append((c.sum() if c.dtype == torch.bool else c.sum(dtype=torch.float64))
                         .to(torch.float64).reshape(1))
    sums = [sum(col) for col in zip(*torch.stack(parts).cpu().tolist())]
    if sum_only:
        return {"sum": sums[0]}
    nonfinite = 0
    if as_float and not math.isfinite(sums[1]):
        nonfinite = sum(int(c.numel() - int(torch.isfinite(c).sum()))
                        for c in flat.split(STATS_CHUNK))
    return {"sum": sums[0], "abs_sum": sums[1] if as_float else None, "nonfinite": nonfinite}


# the weights of an input's fingerprint (input_digest): odd numbers below 2**15, one per 16-bit
# unit (byte, for 1-byte dtypes) of the most an input digest covers (an input travelling whole),
# and one more: the second of its two sums takes them shifted by one
FINGERPRINT_UNITS = FULL_LIMIT_BYTES + 1
FINGERPRINT_SEED = 0x9E3779B1


@functools.lru_cache(maxsize=1)
def fingerprint_weights():
    """The fingerprint's weights (int16 numpy array of FINGERPRINT_UNITS). The worker draws them
    once before it forks (worker._import_stack), so its processes share them instead of each
    drawing 16 M numbers."""
    rng = np.random.default_rng(FINGERPRINT_SEED)
    return rng.integers(0, 1 << 14, FINGERPRINT_UNITS, dtype=np.int16) * 2 + 1


def input_digest(torch, value, sample_seed):
    """Digest of one input item after a call: a tensor's metadata, whole-tensor statistics and a
    fingerprint of the elements its sample would hold (or of all of them, where it travels
    whole), but no elements. The worker only asks whether an input is still what the reference
    was given (compare.same_digest), so a few integers do what a 4 MB sample on the wire did."""
    if not isinstance(value, torch.Tensor):
        return value_digest(torch, value, sample_seed)[0]
    meta, flat = _elements(torch, value, sample_seed, sum_only=True)
    meta["fingerprint"] = _fingerprint(torch, flat)
    return meta


def _fingerprint(torch, flat):
    """Two weighted sums of the elements' bits, exact in int64: equal for the same values (every
    NaN alike, -0.0 as 0.0, as compare.same_digest has always judged), and different wherever a
    single element differs (a 16-bit unit changes by d != 0, times an odd weight). Units are
    below 2**15 in magnitude and so are the weights: each product fits int32, and a sum of up to
    2**24 of them stays below 2**54. As few kernels as that takes (one product, one sum for both
    weightings): each kernel's first launch in a process loads its module, a few ms apiece, and
    the first trial pays them."""
    if flat.dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        flat = torch.where(flat == flat, flat + 0.0, float("nan"))
    if flat.dtype == torch.bool:
        flat = flat.view(torch.uint8)
    units = flat.view(torch.int16) if flat.element_size() >= 2 else flat.view(torch.uint8)
    weights = _weights_on(torch, units.numel(), str(units.device))
    sums = (units.unsqueeze(0) * weights).sum(dim=1, dtype=torch.int64)
    return [int(v) for v in sums.tolist()]


@functools.lru_cache(maxsize=4)
def _weights_on(torch, n, device):
    """The fingerprint's two weightings of n units, as a (2, n) int32 tensor on `device` (the
    weights, and the same shifted by one), copied there once per size."""
    w = fingerprint_weights()
    return torch.from_numpy(np.stack([w[:n], w[1:n + 1]]).astype(np.int32)).to(device)


def value_digest(torch, value, sample_seed):
    """Digest of one output item (tensor or plain value)."""
    if isinstance(value, torch.Tensor):
        return tensor_digest(torch, value, sample_seed)
    if isinstance(value, (int, float, bool)) or value is None:
        return {"kind": "value", "value": value}, []
    return {"kind": "value", "value": repr(value)[:200], "type": type(value).__name__}, []


def input_digests(torch, values, sample_seed):
    """input_digest of each input item, in order (no arrays travel with them)."""
    return [input_digest(torch, v, sample_seed) for v in values]


def digest_list(torch, values, sample_seed):
    """(metas, arrays): arrays are in meta order, one per tensor."""
    metas, arrays = [], []
    for v in values:
        meta, arrs = value_digest(torch, v, sample_seed)
        metas.append(meta)
        arrays.extend(arrs)
    return metas, arrays


def attach_arrays(metas, arrays):
    """Parent side: pair each tensor meta with its received array."""
    it = iter(arrays)
    for m in metas:
        if m.get("kind") == "tensor":
            m["data"] = next(it, None)
    return metas


def attach_frame(obj, arrays, keys):
    """Parent side: split a trial frame's arrays among its digest lists (obj[key] for each key),
    in order."""
    rest = list(arrays)
    for key in keys:
        metas = obj.get(key) or []
        n = sum(1 for m in metas if m.get("kind") == "tensor")
        attach_arrays(metas, rest[:n])
        rest = rest[n:]
