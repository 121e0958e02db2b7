"""Trial inputs: the problem's own distribution plus signed and rescaled variants.

Uniform [0, 1) inputs hide sign bugs (ReLU, abs are identities there) and unit magnitudes hide
tolerance tricks, so trials rotate through distributions. Reference and candidate processes call
this with the same seed and get bit-identical inputs.
"""

DISTRIBUTIONS = ("own", "signed", "small", "own", "large")
_SCALE = {"small": 1e-2, "large": 8.0}


def distribution(trial):
    return DISTRIBUTIONS[trial % len(DISTRIBUTIONS)]


def _transform(torch, t, dist, gen_device):
    if not isinstance(t, torch.Tensor) or not t.is_floating_point() or dist == "own":
        return t
    sign = (torch.randint(0, 2, t.shape, device=gen_device) * 2 - 1).to(t.dtype)
    out = t * sign
    if dist in _SCALE:
        out = out * _SCALE[dist]
    return out


def make_inputs(torch, problem, seed, trial, dtype, device):
    """Inputs of one trial, on the device, floating ones cast to dtype."""
    from .loader import cast_value, device_scope
    torch.manual_seed(seed)
    if device.startswith("cuda"):
        torch.cuda.manual_seed_all(seed)
    with device_scope(torch, device):
        raw = list(problem.get_inputs())
    dist = distribution(trial)
    out = []
    for t in raw:
        if isinstance(t, torch.Tensor):
            t = t.to(device)
            t = _transform(torch, t, dist, t.device)
        out.append(cast_value(torch, t, dtype, device))
    return out, dist
