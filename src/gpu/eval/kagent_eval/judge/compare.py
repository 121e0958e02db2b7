"""The verdict: candidate outputs against reference outputs (worker process, numpy only).

Runs in the worker, which never executes candidate code, on arrays sent by the two children.
"""
import numpy as np

from . import shadow_judge
from ..common import job_defaults
from ..common.digest import sample_positions
# the value checks' arithmetic, shared with the shadow judge (value_errors.py)
from .value_errors import NORM_FACTOR, errors, norm, stat_allowance, sum_sq

# Named tolerances, (rtol, atol) per dtype (docs/lua-api.md, job field `tolerance`). "strict" is
# KernelBench's today (fp32's from torchbench) and the default; "kernelbench-v0.1" is that of
# KernelBench v0 and v0.1, which most published results used.
TOLERANCE_SETS = {
    "strict": {"fp32": (1e-4, 1e-4), "bf16": (1e-2, 1e-2), "fp16": (1e-2, 1e-2)},
    "kernelbench-v0.1": {"fp32": (1e-2, 1e-2), "bf16": (1e-2, 1e-2), "fp16": (1e-2, 1e-2)},
}


def tolerances(dtype, rtol=None, atol=None, name=job_defaults.DEFAULT_TOLERANCE):
    """(rtol, atol) of a job: the named set's for its dtype, unless given."""
    table = TOLERANCE_SETS[name]
    d_rtol, d_atol = table.get(dtype, table["fp32"])
    return (d_rtol if rtol is None else rtol), (d_atol if atol is None else atol)


def _positions(meta, sample_seed):
    if meta.get("full"):
        return None
    return sample_positions(meta["numel"], sample_seed)


def _unravel(flat_index, shape):
    if not shape:
        return []
    return [int(i) for i in np.unravel_index(int(flat_index), tuple(shape))]


def compare_tensor(got, exp, rtol, atol, sample_seed):
    """Dict with ok, reason, max_abs_err, max_rel_err, mismatch (index, got, expected)."""
    res = {"ok": False, "max_abs_err": None, "max_rel_err": None}
    if got.get("kind") != "tensor":
        res["reason"] = "output is not a tensor (%s)" % got.get("type", got.get("value"))
        return res
    if not got.get("plain", False):
        res["reason"] = "output is a tensor subclass, not a plain torch.Tensor"
        res["check"] = "plain_tensor"
        return res
    if got["shape"] != exp["shape"]:
        res["reason"] = "shape %s, expected %s" % (got["shape"], exp["shape"])
        res["check"] = "shape"
        return res
    if got["dtype"] != exp["dtype"]:
        res["reason"] = "dtype %s, expected %s" % (got["dtype"], exp["dtype"])
        res["check"] = "dtype"
        return res
    if got.get("full") != exp.get("full"):
        res["reason"] = "digest kinds differ"
        return res
    g, e = got["data"], exp["data"]
    if g is None or e is None or g.shape != e.shape:
        res["reason"] = "output data missing or truncated"
        return res
    res["check"] = "values"
    # g stays as it came: every difference is taken in float64, against e64, without a copy of g
    e64 = e.astype(np.float64)
    e_sum_sq = sum_sq(e64)  # the tolerance's scale and the reference's norm, where all is finite
    diff, bad, ok_vals, res["max_abs_err"], res["max_rel_err"] = errors(g, e64, rtol, atol,
                                                                          e_sum_sq)
    # the relative L2 error over the elements where both are finite: what a precision (TF32,
    # bf16) leaves on a whole output, where the largest elementwise ratio only finds the output
    # nearest zero (likely_cause.py reads it)
    e_ok, d_ok = (e64, diff) if ok_vals is None else (e64[ok_vals], diff[ok_vals])
    g_ok = g if ok_vals is None else g[ok_vals]
    if ok_vals is None:
        # both finite: the errors are too, unless a difference overflowed, and then their max
        # is infinite; the largest error is the one errors() found
        d_max = res["max_abs_err"]
        all_finite = bool(np.isfinite(d_max))
        finite_d = None if all_finite else np.isfinite(d_ok)
    else:
        finite_d = np.isfinite(d_ok)
        all_finite = bool(finite_d.all())
        d_max = float(d_ok.max()) if all_finite and d_ok.size else None
    ref_norm = norm(e_ok, e_sum_sq if ok_vals is None else None)
    err_norm = norm(d_ok) if all_finite else norm(d_ok[finite_d])
    if all_finite and ref_norm > 0 and d_ok.size:
        res["rel_l2_err"] = err_norm / ref_norm
        # the largest error over the errors' RMS: a few for a rounding spread over the output,
        # sqrt(n) for one wrong element
        res["err_peak"] = d_max / (err_norm / np.sqrt(d_ok.size)) if err_norm else 1.0
    if bad.any():
        first = int(np.argmax(bad))
        pos = _positions(exp, sample_seed)
        flat = first if pos is None else int(pos[first])
        res["mismatch"] = {"index": _unravel(flat, exp["shape"]), "got": _num(g[first]),
                           "expected": _num(e64[first])}
        res["reason"] = "%d of %d compared elements outside atol=%g rtol=%g" % (
            int(bad.sum()), bad.size, atol, rtol)
        res["mismatches"] = int(bad.sum())
        return res
    # magnitude-aware: the error must be small relative to the output's own size
    if ref_norm > 0 and err_norm > NORM_FACTOR * rtol * ref_norm:
        res["check"] = "magnitude"
        res["reason"] = "relative L2 error %.3g > %.3g (output too far from a small true output)" % (
            err_norm / ref_norm, NORM_FACTOR * rtol)
        return res
    # the reference's spread is read only for a constant output; most outputs vary, and most
    # show it in their first two elements, with no pass over the rest
    g_varies = g_ok.size > 1 and (g_ok[0] != g_ok[1] or float(np.ptp(g_ok)) != 0)
    if not g_varies and e_ok.size and float(np.ptp(e_ok)) > 0:
        res["check"] = "magnitude"
        res["reason"] = "constant output where the reference varies"
        return res
    # whole-tensor statistics cover the elements a sample did not include
    if not exp.get("full"):
        es, gs = exp.get("stats") or {}, got.get("stats") or {}
        if gs.get("nonfinite") != es.get("nonfinite"):
            res["reason"] = "non-finite count %s, expected %s" % (gs.get("nonfinite"), es.get("nonfinite"))
            return res
        if es.get("abs_sum") is not None:
            for key in ("sum", "abs_sum"):
                a, b = gs.get(key), es.get(key)
                if a is None or abs(a - b) > stat_allowance(es, exp, rtol, atol):
                    res["check"] = "magnitude"
                    res["reason"] = "whole-tensor %s %.6g, expected %.6g" % (key, a or 0.0, b)
                    return res
    res["ok"] = True
    res["reason"] = None
    res.pop("check", None)
    return res


def _num(x):
    x = float(x)
    if np.isnan(x):
        return "nan"
    if np.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def compare_outputs(got_list, exp_list, rtol, atol, sample_seed, shadows=None,
                    property_trial=False):
    """Compare every output of a call; returns (ok, summary dict). `shadows`: the reference's
    shadow digests of exp_list (shadow.py), used only where a value check fails
    (judge_by_shadow, told whether this is a property trial); an output it passes is listed in
    summary["shadow"]."""
    summary = {"max_abs_err": 0.0, "max_rel_err": 0.0, "rel_l2_err": None, "err_peak": None}
    if len(got_list) != len(exp_list):
        summary.update(reason="%d outputs, expected %d" % (len(got_list), len(exp_list)),
                       check="shape")
        return False, summary
    for i, (g, e) in enumerate(zip(got_list, exp_list)):
        if e.get("kind") != "tensor":
            if g.get("value") != e.get("value"):
                summary.update(reason="output %d is %r, expected %r" % (i, g.get("value"), e.get("value")),
                               check="values", mismatch={"output_index": i})
                return False, summary
            continue
        r = compare_tensor(g, e, rtol, atol, sample_seed)
        for key in ("max_abs_err", "max_rel_err", "rel_l2_err", "err_peak"):
            if r.get(key) is not None:
                summary[key] = max(summary[key] or 0.0, r[key])
        if not r["ok"]:
            judged = None
            if shadows and i < len(shadows) and r.get("check") in ("values", "magnitude"):
                judged = shadow_judge.judge_by_shadow(g, e, shadows[i], rtol, atol,
                                                      property_trial)
            if judged is not None and judged["ok"]:
                del judged["ok"], judged["reason"]
                judged.update(output_index=i, dtype_reason=r["reason"])
                summary.setdefault("shadow", []).append(judged)
                continue
            mm = dict(r.get("mismatch") or {})
            mm["output_index"] = i
            reason = r["reason"]
            if judged is not None:
                reason += " (the reference is itself off its shadow at %d of %d elements, " \
                    "and against the shadow: %s)" % (judged["ref_mismatches"], judged["compared"],
                                                     judged["reason"])
            summary.update(reason="output %d: %s" % (i, reason), check=r.get("check", "values"),
                           mismatch=mm)
            return False, summary
    return True, summary


def same_digest(a, b):
    """Whether an input is still what it was given: two input digests (digest.input_digest) of
    the same values, NaN and signed zeros as the same value."""
    if a.get("kind") != b.get("kind"):
        return False
    if a.get("kind") != "tensor":
        return a.get("value") == b.get("value")
    if a["shape"] != b["shape"] or a["dtype"] != b["dtype"] or a.get("full") != b.get("full"):
        return False
    sa, sb = (a.get("stats") or {}).get("sum"), (b.get("stats") or {}).get("sum")
    # an input with a NaN sums to NaN on both sides, and NaN != NaN
    if sa != sb and not (isinstance(sa, float) and isinstance(sb, float) and np.isnan(sa)
                         and np.isnan(sb)):
        return False
    fa, fb = a.get("fingerprint"), b.get("fingerprint")
    return isinstance(fa, list) and len(fa) == 2 and fa == fb
