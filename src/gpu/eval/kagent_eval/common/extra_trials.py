"""Extra trials: inputs proposed to break a kernel (the reviewer of docs/agents.md), run as trials.

A proposal is a description, never code, so an LLM's proposal can be run as safely as the
problem's own trials:

    {"id": "t1", "why": "...", "calls": [
        {"sizes": {"batch_size": 3},
         "inputs": [{"values": "signed", "layout": "transposed"}, {"same_as": 0}]}]}

Each call is one trial, and the calls of a proposal run one after another in the same process
(a kernel that keeps state from one call to the next meets them in that order, after the regular
trials). `sizes` sets the problem's size constants (inputs.size_constants: the module-level ints
get_inputs reads and the constructor does not); `inputs` is per input, by position: `values` one
of VALUES (inputs.py's distributions), `layout` one of LAYOUTS, `same_as` an earlier input
passed again (the same tensor: aliased inputs). The job's dtype stays.

Checked in two steps, and a proposal that fails either is refused, with its reason (a refused
proposal says nothing of the kernel):
  * its form, by the worker (normalize): known fields and words only, at most MAX_CALLS calls;
  * the problem's contract, where the inputs are made (trial_inputs, in both children): sizes
    only of the problem's size constants, each and together at most MAX_GROWTH times the
    problem's own; values the input contract allows (inputs.outside_contract); a layout the
    input's rank allows; same_as only between inputs of one shape and dtype. The reference child
    reports such a trial skipped with its reason, and the candidate does not run it. The same
    holds for a call the reference itself fails on, or on which its output is not finite where
    every regular trial's is (child_reference.py, as for property trials).
A kernel is judged on its calls as on regular trials (compare.py's tolerances, the fp32 shadow,
inputs left unchanged, no output aliasing an input or an earlier output); a kernel that fails one
fails with EREVIEW and the proposal in result["review"]["failed"] (review_verdict.py, in the
worker: this module is also the children's, and judges nothing).
"""
import json
import re

from . import inputs

KIND = "review"
VALUES = ("own", "signed", "small", "large", "zeros", "negative", "huge")
# contiguous; transposed (the last two dimensions laid out swapped: column-major); strided (every
# other element of a buffer twice as long in the last dimension, the gaps NaN); offset (one
# element past an aligned start: misaligned for vector loads)
LAYOUTS = ("contiguous", "transposed", "strided", "offset")
MAX_PROPOSALS = 8
MAX_CALLS = 4
MAX_INPUTS = 32
MAX_GROWTH = 4
_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
_SIZE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_SEED_OFFSET = 401  # past the property (101+) and resized (211+) trials' seeds


class Refused(Exception):
    """A proposal outside its form or the problem's contract."""


def normalize(raw):
    """The job's `extra_trials` checked for form: {"proposals": [...], "refused": [{id, reason,
    proposal}]}, or None when the job has none. Only a value that is not a list is a bad request;
    a bad proposal is refused on its own."""
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise ValueError("extra_trials must be a list of proposals")
    out = {"proposals": [], "refused": []}
    for k, p in enumerate(raw):
        pid = p.get("id") if isinstance(p, dict) and isinstance(p.get("id"), str) \
            and _ID.match(p["id"]) else "p%d" % (k + 1)
        try:
            if len(out["proposals"]) >= MAX_PROPOSALS:
                raise Refused("more than %d proposals in one job" % MAX_PROPOSALS)
            out["proposals"].append(_proposal(p, pid))
        except Refused as e:
            out["refused"].append({"id": pid, "reason": str(e), "proposal": _clip(p)})
    return out


def _clip(value, limit=2000):
    text = json.dumps(value, sort_keys=True, default=str)
    return value if len(text) <= limit else text[:limit] + "..."


def _proposal(p, pid):
    if not isinstance(p, dict):
        raise Refused("a proposal is an object")
    calls = p.get("calls")
    if calls is None and ("sizes" in p or "inputs" in p):
        calls = [{k: p[k] for k in ("sizes", "inputs") if k in p}]  # one call, written flat
    if not isinstance(calls, list) or not 1 <= len(calls) <= MAX_CALLS:
        raise Refused("calls must be a list of 1 to %d calls" % MAX_CALLS)
    out = {"id": pid, "calls": [_call(c, j) for j, c in enumerate(calls)]}
    if isinstance(p.get("why"), str):
        out["why"] = p["why"][:300]
    return out


def _call(c, j):
    if not isinstance(c, dict):
        raise Refused("call %d is not an object" % (j + 1))
    unknown = sorted(set(c) - {"sizes", "inputs"})
    if unknown:
        raise Refused("call %d has fields this evaluator does not run: %s" % (j + 1, ", ".join(unknown)))
    sizes = c.get("sizes") or {}
    if not isinstance(sizes, dict) or not all(
            isinstance(n, str) and _SIZE_NAME.match(n) and isinstance(v, int)
            and not isinstance(v, bool) for n, v in sizes.items()):
        raise Refused("call %d: sizes must map size constant names to integers" % (j + 1))
    ins = c.get("inputs") or []
    if not isinstance(ins, list) or len(ins) > MAX_INPUTS:
        raise Refused("call %d: inputs must be a list of at most %d" % (j + 1, MAX_INPUTS))
    return {"sizes": dict(sizes), "inputs": [_input(d, j, k) for k, d in enumerate(ins)]}


def _input(d, j, k):
    where = "call %d input %d" % (j + 1, k)
    if d is None:
        return {}
    if not isinstance(d, dict) or set(d) - {"values", "layout", "same_as"}:
        raise Refused("%s: an input is {values, layout} or {same_as}" % where)
    if "same_as" in d:
        if len(d) != 1 or not isinstance(d["same_as"], int) or not 0 <= d["same_as"] < k:
            raise Refused("%s: same_as names an earlier input, alone" % where)
        return {"same_as": d["same_as"]}
    if d.get("values", "own") not in VALUES:
        raise Refused("%s: values must be one of %s" % (where, ", ".join(VALUES)))
    if d.get("layout", "contiguous") not in LAYOUTS:
        raise Refused("%s: layout must be one of %s" % (where, ", ".join(LAYOUTS)))
    return {k2: d[k2] for k2 in ("values", "layout") if k2 in d}


def plan(spec, start, base_seed):
    """The plan entries (child_reference.trial_plan's) of the job's proposals: one per call, from
    trial index `start`, late (a crash is that trial's error, after any timed stage)."""
    extra = spec.get("extra_trials") or {}
    out = []
    for k, p in enumerate(extra.get("proposals") or ()):
        for j, call in enumerate(p["calls"]):
            out.append({"trial": start + len(out), "seed": base_seed + _SEED_OFFSET + 16 * k + j,
                        "dist": KIND, "sizes": call["sizes"] or None, "kind": KIND, "late": True,
                        "call": call, "proposal": k, "call_index": j})
    return out


def trial_inputs(torch, problem, entry, dtype, device, contract):
    """(args, dist) of any plan entry: a proposal's call as described, every other trial by
    inputs.make_inputs. Raises Refused where a call leaves the problem's contract."""
    if entry["kind"] != KIND:
        return inputs.make_inputs(torch, problem, entry["seed"], entry["trial"], dtype, device,
                                  entry["dist"], entry["sizes"], contract)
    call = entry["call"]
    _check_sizes(problem, call["sizes"])
    args, _ = inputs.make_inputs(torch, problem, entry["seed"], entry["trial"], dtype, device,
                                 "own", call["sizes"] or None, contract)
    if len(call["inputs"]) > len(args):
        raise Refused("the problem takes %d inputs, the call describes %d" % (
            len(args), len(call["inputs"])))
    contract = contract or []
    for k, d in enumerate(call["inputs"]):
        if "same_as" in d:
            a, b = args[d["same_as"]], args[k]
            if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
                    and a.shape == b.shape and a.dtype == b.dtype):
                raise Refused("input %d cannot be input %d: not tensors of one shape and dtype"
                              % (k, d["same_as"]))
            args[k] = a
            continue
        args[k] = _described(torch, args[k], d, contract[k] if k < len(contract) else None, k)
    return args, KIND


def _check_sizes(problem, sizes):
    own = inputs.size_constants(problem)
    growth = 1.0
    for name, value in (sizes or {}).items():
        if name not in own:
            raise Refused("%s is not a size constant of the problem (%s)" % (
                name, ", ".join(sorted(own)) or "it has none"))
        if not 1 <= value <= MAX_GROWTH * own[name]:
            raise Refused("%s=%d is outside 1..%d" % (name, value, MAX_GROWTH * own[name]))
        growth *= max(1.0, value / own[name])
    if growth > MAX_GROWTH:
        raise Refused("the sizes grow the problem %.1f times (at most %d)" % (growth, MAX_GROWTH))


def _described(torch, t, d, facts, k):
    values, layout = d.get("values", "own"), d.get("layout", "contiguous")
    if not isinstance(t, torch.Tensor):
        if d:
            raise Refused("input %d is not a tensor" % k)
        return t
    if values != "own":
        if not t.is_floating_point():
            raise Refused("input %d is not floating: its values stay as drawn" % k)
        why = inputs.outside_contract(values, facts)
        if why:
            raise Refused("values %s on input %d leave the problem's contract: %s" % (values, k, why))
        t = inputs.transform_within(torch, t, values, facts)
    return _laid_out(torch, t, layout, k)


def _laid_out(torch, t, layout, k):
    """The same values in another memory layout (a new buffer; the values are those drawn)."""
    if layout == "contiguous":
        return t.contiguous()
    if layout == "transposed":
        if t.dim() < 2:
            raise Refused("input %d has rank %d: nothing to transpose" % (k, t.dim()))
        return t.transpose(-1, -2).contiguous().transpose(-1, -2)
    if t.dim() < 1 or t.numel() == 0:
        raise Refused("input %d has no elements to lay out %s" % (k, layout))
    if layout == "strided":
        shape = list(t.shape)
        buf = torch.empty(shape[:-1] + [2 * shape[-1]], dtype=t.dtype, device=t.device)
        buf.fill_(float("nan") if t.is_floating_point() else 0)
        view = buf[..., ::2]
        view.copy_(t)
        return view
    buf = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)  # "offset"
    view = buf[1:].view(t.shape)
    view.copy_(t)
    return view
