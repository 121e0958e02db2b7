"""Tensors to their wire form (child side): whole when small, else a seeded sample plus
whole-tensor statistics, so multi-GB outputs can be checked without copying them out."""
import functools

import numpy as np

# above this a tensor travels as a sample: the worker's float64 comparison of a whole 256 MB
# output took seconds per trial
FULL_LIMIT_BYTES = 16 << 20
SAMPLE_COUNT = 1 << 20


@functools.lru_cache(maxsize=16)
def sample_positions(numel, seed, count=SAMPLE_COUNT):
    """Sorted flat indices: the first and last 1024 elements plus a seeded random draw.
    Reference and candidate derive the same positions from the same seed."""
    rng = np.random.RandomState(seed % (2 ** 32))
    edge = np.concatenate([np.arange(min(1024, numel)), np.arange(max(0, numel - 1024), numel)])
    pos = np.concatenate([edge, rng.randint(0, numel, size=count, dtype=np.int64)])
    return np.unique(pos)


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
    name = _dtype_name(torch, t)
    meta = {"kind": "tensor", "dtype": name, "shape": list(t.shape),
            "plain": type(t) is torch.Tensor, "numel": t.numel()}
    # a subclass could compute lazily when read; read it as a plain tensor's storage
    base = t.as_subclass(torch.Tensor) if meta["plain"] is False else t
    base = base.detach()
    if base.is_complex():
        base = torch.view_as_real(base)
        name = meta["dtype"] = _dtype_name(torch, base)
    if base.numel():
        meta["stats"] = _stats(torch, base.reshape(-1))
    full = force_full or base.numel() * base.element_size() <= FULL_LIMIT_BYTES
    flat = base.reshape(-1)
    if not full:
        pos = torch.from_numpy(sample_positions(base.numel(), sample_seed)).to(flat.device)
        flat = flat[pos]
    meta["full"] = full
    flat = flat.contiguous().cpu()
    wire_name = name
    if name == "bfloat16":
        flat = flat.view(torch.int16)
    elif name == "bool":
        flat = flat.to(torch.uint8)
        wire_name = "uint8"
    arr = flat.numpy()
    return meta, [(wire_name, [arr.size], arr)]


STATS_CHUNK = 1 << 26  # elements per step: temporaries stay small beside a multi-GB tensor


def _stats(torch, flat):
    """Whole-tensor sum, absolute sum and non-finite count, a chunk at a time (float64 sums)."""
    as_float = flat.is_floating_point()
    total = abs_total = 0.0
    nonfinite = 0
    for start in range(0, flat.numel(), STATS_CHUNK):
        c = flat[start:start + STATS_CHUNK]
        if as_float:
            total += float(c.sum(dtype=torch.float64))
            abs_total += float(c.abs().sum(dtype=torch.float64))
            nonfinite += int(c.numel() - int(torch.isfinite(c).sum()))
        else:
            total += float(c.sum() if c.dtype == torch.bool else c.sum(dtype=torch.float64))
    return {"sum": total, "abs_sum": abs_total if as_float else None, "nonfinite": nonfinite}


def value_digest(torch, value, sample_seed):
    """Digest of one output item (tensor or plain value)."""
    if isinstance(value, torch.Tensor):
        return tensor_digest(torch, value, sample_seed)
    if isinstance(value, (int, float, bool)) or value is None:
        return {"kind": "value", "value": value}, []
    return {"kind": "value", "value": repr(value)[:200], "type": type(value).__name__}, []


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
