"""Roofline of a problem on this GPU: compulsory bytes and FLOPs against measured peaks.

    compulsory_bytes(inputs, outputs, params) -> int
        every input and parameter read once, every output written once (whole tensors: a
        strided transposed convolution whose outputs are mostly zeros still writes them all).
    flops(model, inputs) -> int or None
        torch.utils.flop_counter.FlopCounterMode when present (torch >= 2.1), else an analytic
        count for single conv/linear modules, else None.
    measure_peaks(device_index) -> {"device", "dram_bytes_per_s", "dram_read_bytes_per_s",
        "dram_spec_bytes_per_s", "flops_per_s": {fp32,bf16,fp16}}
        a large device-to-device copy (read + write bytes), a large read-only sum, the memory's
        specified bandwidth (the driver's memory clock and bus width), and a large matmul per
        dtype,
        best of a few runs; cached in memory and in a file, _cache_path (a worker's children: the
        sandbox's per-user cache, jail.py).
    roofline(bytes, flops, peaks, measured_ms, dtype="bf16") -> {bytes, flops, lower_bound_ms,
        memory_bound_ms, compute_bound_ms, sol_pct, memory_sol_pct, binding: "memory"|"compute",
        fewer_ops?, note?}
        sol_pct = lower bound / measured time * 100 (speed of light; 100 = at the bound).

Only the compulsory bytes bind every correct kernel (memory_sol_pct, the figure the evaluator's
speed-of-light rule reads). The FLOPs are the reference's: a better algorithm need not perform
them (diag(A) @ B is a row scaling, no matmul), so a kernel faster than the compute bound is
reported as doing fewer operations than the reference (fewer_ops), its bound is then the memory
bound alone, and that is never a reason to doubt its figure.
"""
import json
import os
import re

_PEAKS = {}


def _tensors(value):
    """Every tensor in a value made of tensors, lists, tuples, dicts and modules."""
    import torch
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v)
    elif isinstance(value, torch.nn.Module):
        yield from value.parameters()
        yield from value.buffers()


def nbytes(value):
    return sum(t.numel() * t.element_size() for t in _tensors(value))


def compulsory_bytes(inputs, outputs, params=()):
    return nbytes(inputs) + nbytes(outputs) + nbytes(params)


def _conv_flops(module, x, out):
    import torch.nn as nn
    if isinstance(module, (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)):
        # each input element scatters into Cout/groups * prod(kernel) outputs
        per_in = module.out_channels // module.groups
        for k in module.kernel_size:
            per_in *= k
        return 2 * x.numel() * per_in
    per_out = module.in_channels // module.groups
    for k in module.kernel_size:
        per_out *= k
    return 2 * out.numel() * per_out


def analytic_flops(model, inputs, outputs=None):
    """Multiply-adds x 2 for a model that is one conv or linear layer; None otherwise."""
    import torch.nn as nn
    convs = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d,
             nn.ConvTranspose3d)
    leaves = [m for m in model.modules() if not list(m.children())] if isinstance(
        model, nn.Module) else []
    if len(leaves) != 1 or not inputs:
        return None
    layer, x = leaves[0], inputs[0]
    if isinstance(layer, convs) and outputs is not None:
        return _conv_flops(layer, x, outputs)
    if isinstance(layer, nn.Linear):
        return 2 * (x.numel() // x.shape[-1]) * layer.in_features * layer.out_features
    return None


def flops(model, inputs):
    """FLOPs of one forward (runs it once when the flop counter is available)."""
    import torch
    try:
        from torch.utils.flop_counter import FlopCounterMode
    except ImportError:
        FlopCounterMode = None
    if FlopCounterMode is not None:
        counter = FlopCounterMode(display=False)
        with counter, torch.no_grad():
            model(*inputs)
        return int(counter.get_total_flops())
    with torch.no_grad():
        out = model(*inputs)
    return analytic_flops(model, inputs, out)


def _cache_path(name):
    """The peaks file of a GPU: in $KAGENT_CACHE_DIR, else $XDG_CACHE_HOME/kagent, else
    ~/.cache/kagent (the XDG base directory rule)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
    xdg = os.environ.get("XDG_CACHE_HOME")
    if not (xdg and os.path.isabs(xdg)):  # a relative XDG_CACHE_HOME is invalid: ignored
        xdg = os.path.join(os.path.expanduser("~"), ".cache")
    root = os.environ.get("KAGENT_CACHE_DIR") or os.path.join(xdg, "kagent")
    return os.path.join(root, "peaks-v2-%s.json" % safe)  # v2: with the read bandwidth


def _best_ms(torch, fn, reps=5, inner=10):
    fn()
    torch.cuda.synchronize()
    best = None
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        ms = start.elapsed_time(end) / inner
        best = ms if best is None else min(best, ms)
    return best


# cuDeviceGetAttribute's CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE (kHz) and _GLOBAL_MEMORY_BUS_WIDTH
# (bits), from cuda.h
_CU_MEMORY_CLOCK_KHZ, _CU_MEMORY_BUS_BITS = 36, 37


def spec_dram_bytes_per_s(device_index=0):
    """The memory's specified bandwidth, from the driver (memory clock, two transfers a cycle,
    times the bus width): what no kernel can read faster than, where a measured copy or sum
    stays some percent below it. None where the driver does not say."""
    import ctypes
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        dev, clock, bits = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        if cuda.cuInit(0) or cuda.cuDeviceGet(ctypes.byref(dev), int(device_index)):
            return None
        if cuda.cuDeviceGetAttribute(ctypes.byref(clock), _CU_MEMORY_CLOCK_KHZ, dev) or \
                cuda.cuDeviceGetAttribute(ctypes.byref(bits), _CU_MEMORY_BUS_BITS, dev):
            return None
    except (OSError, AttributeError):
        return None
    if clock.value <= 0 or bits.value <= 0:
        return None
    return 2.0 * clock.value * 1e3 * bits.value / 8.0


def measure_peaks(device_index=0, refresh=False):
    import torch
    name = torch.cuda.get_device_name(device_index)
    if not refresh and name in _PEAKS:
        return _PEAKS[name]
    path = _cache_path(name)
    if not refresh and os.path.exists(path):
        try:
            with open(path) as f:
                _PEAKS[name] = json.load(f)
            if "dram_spec_bytes_per_s" not in _PEAKS[name]:  # a file written before it was kept
                _PEAKS[name]["dram_spec_bytes_per_s"] = spec_dram_bytes_per_s(device_index)
            return _PEAKS[name]
        except (OSError, ValueError):
            pass
    device = torch.device("cuda", device_index)
    n_bytes = 1 << 30  # far beyond L2, so the copy runs at DRAM speed
    src = torch.empty(n_bytes, dtype=torch.uint8, device=device).fill_(1)
    dst = torch.empty_like(src)
    copy_ms = _best_ms(torch, lambda: dst.copy_(src))
    # a read-only pass: how far a read-heavy kernel can legitimately beat the copy bandwidth
    # the bound is made of (the speed-of-light check's headroom)
    words = src.view(torch.float32)
    read_ms = _best_ms(torch, lambda: words.sum())
    del src, dst, words
    peaks = {"device": name, "dram_bytes_per_s": 2 * n_bytes / (copy_ms * 1e-3),
             "dram_read_bytes_per_s": n_bytes / (read_ms * 1e-3),
             "dram_spec_bytes_per_s": spec_dram_bytes_per_s(device_index), "flops_per_s": {}}
    n = 8192
    for key, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16),
                       ("fp16", torch.float16)):
        a = torch.randn(n, n, device=device, dtype=dtype)
        b = torch.randn(n, n, device=device, dtype=dtype)
        ms = _best_ms(torch, lambda: torch.mm(a, b), reps=3, inner=5)
        peaks["flops_per_s"][key] = 2 * n ** 3 / (ms * 1e-3)
        del a, b
    torch.cuda.empty_cache()
    _PEAKS[name] = peaks
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + ".tmp%d" % os.getpid()
        with open(tmp, "w") as f:
            json.dump(peaks, f, indent=1)
        os.replace(tmp, path)
    except OSError:
        pass  # the in-memory copy is enough for this process
    return peaks


FEWER_OPS_NOTE = "fewer operations than the reference"


def roofline(nbytes_, nflops, peaks, measured_ms=None, dtype="bf16"):
    memory_ms = nbytes_ / peaks["dram_bytes_per_s"] * 1e3
    rate = (peaks.get("flops_per_s") or {}).get(dtype)
    compute_ms = nflops / rate * 1e3 if (nflops and rate) else 0.0
    fewer_ops = bool(measured_ms and compute_ms > memory_ms and measured_ms < compute_ms)
    # beating the reference's FLOPs at this rate means performing fewer of them: the compute
    # bound is the reference's, not this kernel's
    lower = memory_ms if fewer_ops else max(memory_ms, compute_ms)
    out = {
        "bytes": int(nbytes_),
        "flops": int(nflops) if nflops is not None else None,
        "memory_bound_ms": memory_ms,
        "compute_bound_ms": compute_ms,
        "lower_bound_ms": lower,
        "sol_pct": lower / measured_ms * 100.0 if measured_ms else None,
        "memory_sol_pct": memory_ms / measured_ms * 100.0 if measured_ms else None,
        "binding": "compute" if compute_ms > memory_ms and not fewer_ops else "memory",
    }
    if fewer_ops:
        out.update(fewer_ops=True, note=FEWER_OPS_NOTE)
    return out
