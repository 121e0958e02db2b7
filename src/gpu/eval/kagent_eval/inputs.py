"""Trial inputs: the problem's own distribution plus signed and rescaled variants, property inputs
(zeros, negatives, large magnitudes, non-finite values), and problems resized through their size
constants.

Uniform [0, 1) inputs hide sign bugs (ReLU, abs are identities there) and unit magnitudes hide
tolerance tricks, so trials rotate through distributions. Reference and candidate processes call
this with the same seed and get bit-identical inputs.

Transforms work in place, a chunk at a time: one input set is all the memory a trial needs, so a
16 GiB input fits where a full-size sign tensor (int64) beside it would not.
"""

DISTRIBUTIONS = ("own", "signed", "small", "own", "large")
# property trials run after the regular ones, with their own (reported) seed; "nonfinite" is
# reported as its own check and only rejects when the job asks for it
PROPERTIES = ("zeros", "negative", "huge", "nonfinite")
_SCALE = {"small": 1e-2, "large": 8.0}
_HUGE = {"float16": 1e2}  # fp16 tops out at 65504: a larger factor only measures overflow
_HUGE_DEFAULT = 1e3
CHUNK = 1 << 26  # elements per in-place step


def distribution(trial):
    return DISTRIBUTIONS[trial % len(DISTRIBUTIONS)]


def _chunks(t):
    flat = t.view(-1)
    for start in range(0, flat.numel(), CHUNK):
        yield flat[start:start + CHUNK]


def _random_signs(torch, chunk):
    sign = torch.randint(0, 2, chunk.shape, device=chunk.device, dtype=torch.int8)
    return sign.mul_(2).sub_(1)


def _transform(torch, t, dist):
    """Applies a distribution to one input in place (floating tensors only)."""
    if not isinstance(t, torch.Tensor) or not t.is_floating_point() or dist == "own":
        return t
    if not t.is_contiguous():
        t = t.contiguous()
    if dist == "zeros":
        return t.zero_()
    huge = _HUGE.get(str(t.dtype).replace("torch.", ""), _HUGE_DEFAULT)
    for i, c in enumerate(_chunks(t)):
        if dist == "negative":
            c.abs_().neg_()
        elif dist == "huge":
            c.mul_(_random_signs(torch, c)).mul_(huge)
        elif dist == "nonfinite":
            c.mul_(_random_signs(torch, c))
            if i == 0 and c.numel() >= 8:  # a NaN, +inf and -inf at fixed places
                n = c.numel()
                c[n // 7] = float("nan")
                c[(2 * n) // 7] = float("inf")
                c[(3 * n) // 7] = float("-inf")
        else:
            c.mul_(_random_signs(torch, c))
            if dist in _SCALE:
                c.mul_(_SCALE[dist])
    return t


def make_inputs(torch, problem, seed, trial, dtype, device, dist=None, sizes=None):
    """Inputs of one trial, on the device, floating ones cast to dtype. dist overrides the
    trial's distribution; sizes ({name: int}) resizes the problem through its size constants."""
    from .loader import cast_value, device_scope
    torch.manual_seed(seed)
    if device.startswith("cuda"):
        torch.cuda.manual_seed_all(seed)
    with device_scope(torch, device), resized(problem, sizes):
        raw = list(problem.get_inputs())
    dist = dist or distribution(trial)
    out = []
    for t in raw:
        if isinstance(t, torch.Tensor):
            t = t.to(device)
            t = _transform(torch, t, dist)
        out.append(cast_value(torch, t, dtype, device))
    del raw
    return out, dist


class resized:
    """Context: the problem module's size constants set to other values, then restored."""

    def __init__(self, problem, sizes):
        self.problem, self.sizes, self.saved = problem, sizes or {}, {}

    def __enter__(self):
        for name, value in self.sizes.items():
            self.saved[name] = getattr(self.problem, name)
            setattr(self.problem, name, value)
        return self

    def __exit__(self, *exc):
        for name, value in self.saved.items():
            setattr(self.problem, name, value)
        return False


def size_constants(problem):
    """Module-level ints that get_inputs reads and get_init_inputs does not: the batch sizes and
    extents a kernel should not have hard-coded (constructor constants such as a kernel size
    change the operator, not its size)."""
    import types
    code = getattr(getattr(problem, "get_inputs", None), "__code__", None)
    if code is None:
        return {}
    init_code = getattr(getattr(problem, "get_init_inputs", None), "__code__", None)
    used = set(_names(code, types))
    init_used = set(_names(init_code, types)) if init_code is not None else set()
    out = {}
    for name in sorted(used - init_used):
        value = getattr(problem, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 2:
            out[name] = value
    return out


def _names(code, types):
    for name in code.co_names:
        yield name
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _names(const, types)


def size_variants(problem):
    """Resizings to verify on: every size constant to about a half and about a third (odd where
    that is possible, so tails and masks are exercised). [] when the problem has none."""
    sizes = size_constants(problem)
    if not sizes:
        return []
    variants = []
    for div in (2, 3):
        v = {name: max(1, value // div + 1) for name, value in sizes.items()}
        if v != sizes and v not in variants:
            variants.append(v)
    return variants
