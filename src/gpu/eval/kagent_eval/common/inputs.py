"""Trial inputs: the problem's own distribution plus signed and rescaled variants, property inputs
(zeros, negatives, large magnitudes, non-finite values), and problems resized through their size
constants.

Uniform [0, 1) inputs hide sign bugs (ReLU, abs are identities there) and unit magnitudes hide
tolerance tricks, so trials rotate through distributions. Reference and candidate processes call
this with the same seed and get bit-identical inputs.

Transforms work in place, a chunk at a time: one input set is all the memory a trial needs, so a
16 GiB input fits where a full-size sign tensor (int64) beside it would not.

The problem's input contract: what its get_inputs implies of each floating input, found by
drawing it a few times (input_contract): never negative or never positive, within [0, 1] or
[-1, 1], rows (along the last dimension) summing to one, whole numbers. Property trials stay
inside it: an input a property trial's transform would take outside it is left as drawn
(outside_contract), a one-signed input is scaled by positive factors only, and a property trial
that would leave every floating input as drawn is not run (child_reference.py skips it with a
note). The regular trials keep their sign flips and scales on every input but one whose rows sum
to one or whose values are whole numbers: uniform [0, 1) inputs are a sampling choice, and flipping
their signs is what exposes a ReLU or abs() written as an identity.
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


# the problem's own inputs are drawn this many times, with these seeds, to find its contract
CONTRACT_DRAWS = 3
CONTRACT_SEED = 7127
ROW_SUM_TOL = {"float16": 1e-2, "bfloat16": 1e-2}
ROW_SUM_TOL_DEFAULT = 1e-3


def input_contract(torch, problem, device):
    """What get_inputs implies of each input: a list with, per input, None (not a floating
    tensor) or {lower, upper, rows_sum_to_one, integer} held by every one of CONTRACT_DRAWS
    draws. lower is 0 (never negative), -1 (never below -1) or None; upper 0, 1 or None."""
    from .loader import device_scope
    contract = None
    for k in range(CONTRACT_DRAWS):
        torch.manual_seed(CONTRACT_SEED + k)
        if device.startswith("cuda"):
            torch.cuda.manual_seed_all(CONTRACT_SEED + k)
        with device_scope(torch, device):
            raw = list(problem.get_inputs())
        facts = [_facts(torch, t) for t in raw]
        del raw
        contract = facts if contract is None else [
            _merge(a, b) for a, b in zip(contract, facts)]
    return contract or []


def _facts(torch, t):
    if not isinstance(t, torch.Tensor) or not t.is_floating_point():
        return None
    if not t.numel():
        return {"lower": None, "upper": None, "rows_sum_to_one": False, "integer": False}
    lo, hi = float(t.min()), float(t.max())  # NaN when the input holds one: no bound then
    facts = {"lower": 0 if lo >= 0 else (-1 if lo >= -1 else None),
             "upper": 0 if hi <= 0 else (1 if hi <= 1 else None),
             "rows_sum_to_one": False, "integer": True}
    for c in _chunks(t if t.is_contiguous() else t.contiguous()):
        if not bool(torch.equal(c, c.round())):
            facts["integer"] = False
            break
    if facts["lower"] == 0 and t.dim() >= 1 and t.shape[-1] >= 2:
        tol = ROW_SUM_TOL.get(str(t.dtype).replace("torch.", ""), ROW_SUM_TOL_DEFAULT)
        sums = t.sum(dim=-1, dtype=torch.float64)
        facts["rows_sum_to_one"] = bool(((sums - 1.0).abs() <= tol).all())
    return facts


def _merge(a, b):
    if a is None or b is None:
        return None
    order = {None: 2, -1: 1, 0: 0}  # lower bounds from tightest to none; upper bounds mirrored
    lower = a["lower"] if order[a["lower"]] >= order[b["lower"]] else b["lower"]
    up = {None: 2, 1: 1, 0: 0}
    upper = a["upper"] if up[a["upper"]] >= up[b["upper"]] else b["upper"]
    return {"lower": lower, "upper": upper,
            "rows_sum_to_one": a["rows_sum_to_one"] and b["rows_sum_to_one"],
            "integer": a["integer"] and b["integer"]}


def outside_contract(dist, facts):
    """Why `dist` would take an input with these facts outside the problem's contract, or None
    where the transform keeps it inside (or the input has no contract)."""
    if not facts or dist == "own":
        return None
    if facts["rows_sum_to_one"]:
        return "its rows sum to one"
    if facts["integer"] and dist in ("small", "nonfinite"):
        return "its values are whole numbers"
    if dist not in PROPERTIES:
        return None  # the regular trials' sign flips and scales (module docstring)
    lower, upper = facts["lower"], facts["upper"]
    if dist == "negative" and lower == 0:
        return "it is never negative"
    if dist in ("huge", "nonfinite") and (lower == -1 or upper == 1):
        return "its values lie in [%s, %s]" % (
            "-inf" if lower is None else lower, "inf" if upper is None else upper)
    if dist == "nonfinite" and (lower is not None or upper is not None):
        return "it is never %s" % ("negative" if lower == 0 else "positive")
    return None


def as_drawn(dist, contract):
    """[(input index, reason)] of the inputs a trial of `dist` leaves as drawn."""
    return [(k, why) for k, why in ((k, outside_contract(dist, f)) for k, f in
                                    enumerate(contract or [])) if why]


def leaves_all_as_drawn(dist, contract):
    """True where a trial of `dist` would transform none of the problem's floating inputs (and
    it has some): such a trial is the problem's own distribution again."""
    floating = [k for k, f in enumerate(contract or []) if f is not None]
    drawn = {k for k, _ in as_drawn(dist, contract)}
    return bool(floating) and all(k in drawn for k in floating)


def _keeps_sign(dist, facts):
    """A property trial scales a one-signed input by positive factors only."""
    return bool(facts) and dist in PROPERTIES and (facts["lower"] == 0 or facts["upper"] == 0)


def _transform(torch, t, dist, keep_sign=False):
    """Applies a distribution to one input in place (floating tensors only); keep_sign: scale
    without flipping signs."""
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
            if not keep_sign:
                c.mul_(_random_signs(torch, c))
            c.mul_(huge)
        elif dist == "nonfinite":
            if not keep_sign:
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


def transform_within(torch, t, dist, facts):
    """One input with `dist` applied, or as drawn where that would take it outside the
    problem's contract (facts: its input_contract entry)."""
    if outside_contract(dist, facts) is not None:
        return t
    return _transform(torch, t, dist, _keeps_sign(dist, facts))


def make_inputs(torch, problem, seed, trial, dtype, device, dist=None, sizes=None, contract=None):
    """Inputs of one trial, on the device, floating ones cast to dtype. dist overrides the
    trial's distribution; sizes ({name: int}) resizes the problem through its size constants;
    contract (input_contract's) keeps the transforms inside the problem's contract."""
    from .loader import cast_value, device_scope
    torch.manual_seed(seed)
    if device.startswith("cuda"):
        torch.cuda.manual_seed_all(seed)
    with device_scope(torch, device), resized(problem, sizes):
        raw = list(problem.get_inputs())
    dist = dist or distribution(trial)
    out = []
    contract = contract or []
    for k, t in enumerate(raw):
        if isinstance(t, torch.Tensor):
            t = t.to(device)
            t = transform_within(torch, t, dist, contract[k] if k < len(contract) else None)
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


def shrunk_sizes(problem, factor):
    """The problem made about `factor` times smaller (compute-sanitizer's racecheck, sanitizer.py,
    whose cost grows with the work): the largest size constants halved, one halving at a time,
    while they stay multiples of 16 and at least 64, so that kernels specialized on a size's
    divisibility compile as at full size. {name: int} of the changed constants; {} where none
    can shrink."""
    sizes = size_constants(problem)
    out, reduced = dict(sizes), 1
    while reduced < factor:
        can = [n for n, v in out.items() if v % 32 == 0 and v // 2 >= 64]
        if not can:
            break
        name = max(can, key=lambda n: (out[n], n))
        out[name] //= 2
        reduced *= 2
    return {n: v for n, v in out.items() if v != sizes[n]}
