"""Judging an output against the reference's shadow at a higher precision (shadow.py): where the
reference is itself off the true result, a candidate that failed against the reference is judged
against the shadow, with the reference's own error as the yardstick (src/gpu/eval/README.md,
"Correctness"). compare.compare_outputs calls it only where a value check failed."""
import numpy as np

from . import shadow_range, value_errors

# Ill-conditioned trials at low precision (src/gpu/eval/README.md, "Correctness"): a bf16/fp16
# reference can itself be off its fp32 shadow by more than the tolerance (training-mode batch
# norm after a convolution on small inputs turns one rounding step into a tenth of the output),
# so two valid implementations disagree there. Such a trial judges the candidate against the
# shadow, and allows it no more error than SHADOW_FACTOR times the reference's own, in L2 and at
# each of SHADOW_QUANTILES; a reference off its shadow by more than SHADOW_MAX_REL (relative L2)
# says nothing of any candidate and the trial rejects as before. Where the reference is itself
# within the tolerance of its shadow, a candidate off the reference but within the tolerance of
# the shadow at every element is as right as the reference (both are within tolerance of the fp32
# result; they differ from each other by up to twice it): it passes too, listed as rule
# "tolerance". A candidate that rounds once in fp32 where the reference rounds at every bf16 step
# is such a one.
# An fp32 reference has an fp64 shadow on its all-zero-input trials, and on a GPU that lets it
# compute in TF32 on every trial (shadow.py). The fp64 shadow judges only where the reference is
# itself off it: beyond the elementwise tolerance (TF32's rounding, as a bf16 reference's), or by
# more than the magnitude check allows a candidate (_reference_is_noise: its output is then
# rounding noise around the true one). Where the reference agrees with its shadow, the first
# verdict stands: a small true output keeps the magnitude check, and a candidate of zeros for it
# is refused as before.
SHADOW_FACTOR = 2.0
SHADOW_MAX_REL = 0.25
# on a property trial the reference is too ill-conditioned to judge (_unjudged), a candidate's
# own rounding noise may be this many times the reference's (the L2 #11 pattern's right
# candidates came out at about 5x), not more
NOISE_FACTOR = 10.0
SHADOW_QUANTILES = (0.5, 0.9, 0.99, 0.999, 1.0)
# an fp64 shadow whose spread is at most this share of its largest magnitude is a constant
# (fp64 rounds at 1.1e-16 relative; a true variation of the output is far above this)
CONSTANT_REL = 1e-12


def judge_by_shadow(got, exp, shadow, rtol, atol, property_trial=False):
    """A candidate output that failed against the reference output `exp`, judged against the
    reference's shadow of it (fp32 for a low-precision reference, fp64 for an fp32 one: the
    same model and inputs upcast, digested at the same positions). None where the shadow cannot
    judge: none usable, or an fp64 shadow the reference agrees with.
    Where the reference passes the elementwise test against its shadow, the candidate must too
    (within_shadow). Otherwise
    {ok, reason, rule: "ratio", ref_mismatches, compared, cand_err_norm, ref_err_norm,
    shadow_norm}; on a property trial (`property_trial`) whose fp64 shadow is zero to the
    tolerance, or that the reference is too ill-conditioned to judge anyone on, rule "unjudged"
    (_unjudged)."""
    if not shadow or shadow.get("kind") != "tensor":
        return None
    g, e, s = got.get("data"), exp.get("data"), shadow.get("data")
    if g is None or e is None or s is None or not g.shape == e.shape == s.shape or \
            shadow["shape"] != exp["shape"] or shadow.get("full") != exp.get("full"):
        return None
    g64, e64, s64 = g.astype(np.float64), e.astype(np.float64), s.astype(np.float64)
    if shadow_range.leaves_range(exp, e64, s64):  # the order of operations decides overflow
        return shadow_range.judge(exp, g64, e64, s64, rtol, atol)
    judged = np.isfinite(e64) & np.isfinite(s64)
    ref_bad = int(value_errors.errors_finite(e64[judged], s64[judged], rtol, atol)[1].sum())
    if shadow.get("dtype") == "float64" and not ref_bad and \
            not _reference_is_noise(e64[judged], s64[judged], rtol):
        return None
    if not ref_bad:
        return _within_shadow(got, exp, shadow, g64, e64, s64, judged, rtol, atol)
    res = {"ok": False, "rule": "ratio", "ref_mismatches": ref_bad, "compared": int(judged.sum())}
    # where the reference or its shadow is not finite the reference decides, as before
    rg, re_ = g64[~judged], e64[~judged]
    with np.errstate(invalid="ignore"):
        same = (np.isnan(rg) & np.isnan(re_)) | (rg == re_) | (np.abs(rg - re_) <= atol + rtol * np.abs(re_))
    if not same.all():
        res["reason"] = "a non-finite element of the reference differs"
        return res
    cg, ce, cs = g64[judged], e64[judged], s64[judged]
    if not np.isfinite(cg).all():
        res["reason"] = "non-finite values where the reference is finite"
        return res
    cand_err, ref_err = np.abs(cg - cs), np.abs(ce - cs)
    res.update(cand_err_norm=value_errors.norm(cand_err),
               ref_err_norm=value_errors.norm(ref_err), shadow_norm=value_errors.norm(cs))
    exact = property_trial and shadow.get("dtype") == "float64"
    if exact and cs.size and float(np.max(np.abs(cs))) <= atol:
        return _unjudged(res, got, exp, (
            "the true output (fp64) is zero to the tolerance (largest magnitude %.3g, atol %g) "
            "and the reference is rounding noise around it (off at %d of %d elements): this trial "
            "cannot tell a right candidate from a wrong one" % (
                float(np.max(np.abs(cs))), atol, res["ref_mismatches"], res["compared"])))
    if not res["shadow_norm"] or res["ref_err_norm"] > SHADOW_MAX_REL * res["shadow_norm"]:
        res["reason"] = "the reference is %.3g off its shadow (relative L2, over %g): too " \
            "ill-conditioned at this dtype to judge any candidate" % (
                res["ref_err_norm"] / max(res["shadow_norm"], 1e-300), SHADOW_MAX_REL)
        if exact and res["cand_err_norm"] <= NOISE_FACTOR * res["ref_err_norm"]:
            return _unjudged(res, got, exp, res["reason"] + ": this trial cannot tell a right "
                             "candidate from a wrong one")
        return res
    if res["cand_err_norm"] > SHADOW_FACTOR * res["ref_err_norm"]:
        res["reason"] = "L2 error %.4g against the shadow, over %g x the reference's own %.4g" \
            % (res["cand_err_norm"], SHADOW_FACTOR, res["ref_err_norm"])
        return res
    cq = np.quantile(cand_err, SHADOW_QUANTILES)
    rq = np.quantile(ref_err, SHADOW_QUANTILES)
    for q, c, r in zip(SHADOW_QUANTILES, cq, rq):
        if c > SHADOW_FACTOR * r + atol:
            res["reason"] = "error quantile %g against the shadow %.4g, over %g x the " \
                "reference's own %.4g + atol" % (q, c, SHADOW_FACTOR, r)
            return res
    if np.ptp(cs) > 0 and np.ptp(cg) == 0:
        res["reason"] = "constant output where the reference varies"
        return res
    if not exp.get("full"):
        gs, es, ss = got.get("stats") or {}, exp.get("stats") or {}, shadow.get("stats") or {}
        res["reason"] = _nonfinite_count_differs(got, exp)
        if res["reason"]:
            return res
        for key in ("sum", "abs_sum"):
            a, r, b = gs.get(key), es.get(key), ss.get(key)
            if a is None or r is None or b is None or abs(a - b) > value_errors.stat_allowance(
                    ss, exp, rtol, atol) + SHADOW_FACTOR * abs(r - b):
                res["reason"] = "whole-tensor %s %.6g against the shadow's %.6g" % (
                    key, a or 0.0, b or 0.0)
                return res
    res.update(ok=True, reason=None)
    return res


def _unjudged(res, got, exp, note):
    """A property trial (the all-zero one; any, where TF32 gives every trial an fp64 shadow)
    that no candidate can be judged on: its true output (the fp64 shadow) is zero to the
    tolerance while the fp32 reference is off it beyond the tolerance, or the reference is too
    far off its shadow to bound anyone's error (SHADOW_MAX_REL). The reference's output is then
    rounding noise amplified by the model (a batch norm of zeros divides its statistics' rounding
    by sqrt(eps), a group norm or another batch norm after it again), and any right candidate's
    is noise of its own size. The trial judges nothing: ok with rule "unjudged" and `note`, which
    the verdict lists among the skipped trials. The regular trials still judge; the candidate
    must still be finite where the reference is (checked before) and, for a sample, have the
    reference's count of non-finite elements."""
    why = None if exp.get("full") else _nonfinite_count_differs(got, exp)
    if why:
        res["reason"] = why
        return res
    res.update(ok=True, rule="unjudged", reason=None, note=note)
    return res


def _nonfinite_count_differs(got, exp):
    """Why a sampled output's whole-tensor count of non-finite elements is not the reference's,
    or None."""
    g, e = (got.get("stats") or {}).get("nonfinite"), (exp.get("stats") or {}).get("nonfinite")
    return None if g == e else "non-finite count %s, expected %s" % (g, e)


def _reference_is_noise(e64, s64, rtol):
    """The reference off its (fp64) shadow by more than the magnitude check allows a candidate
    off the reference (relative L2 over value_errors.NORM_FACTOR * rtol), or off a shadow that is
    all zero; or a shadow that is constant to fp64's rounding (CONSTANT_REL of its largest magnitude)
    where the reference varies more: the true output is that constant (a softmax of the exact
    zeros a batch norm gives all-zero inputs, uniform) and the reference's variation is its
    rounding, which the check "constant output where the reference varies" must not hold
    against a candidate that computes the constant."""
    err, size = value_errors.norm(e64 - s64), value_errors.norm(s64)
    if not size:
        return err > 0
    if err > value_errors.NORM_FACTOR * rtol * size:
        return True
    s_spread = float(np.ptp(s64)) if s64.size else 0.0
    return s64.size > 1 and s_spread <= CONSTANT_REL * float(np.max(np.abs(s64))) \
        and float(np.ptp(e64)) > s_spread


def _within_shadow(got, exp, shadow, g64, e64, s64, judged, rtol, atol):
    """The reference is within tolerance of its shadow at every judged element: the candidate
    passes when it is too, where the reference or the shadow is not finite it matches the
    reference, and (digests of a sample) its whole-tensor sums are within the same allowance of
    the shadow's. None when it is not (the first verdict stands)."""
    rg, re_ = g64[~judged], e64[~judged]
    with np.errstate(invalid="ignore"):
        same = (np.isnan(rg) & np.isnan(re_)) | (rg == re_) | (np.abs(rg - re_) <= atol + rtol * np.abs(re_))
    cg, cs = g64[judged], s64[judged]
    if not same.all() or not np.isfinite(cg).all() or \
            value_errors.errors_finite(cg, cs, rtol, atol)[1].any():
        return None
    if not exp.get("full"):
        gs, ss = got.get("stats") or {}, shadow.get("stats") or {}
        if _nonfinite_count_differs(got, exp):
            return None
        for key in ("sum", "abs_sum"):
            a, b = gs.get(key), ss.get(key)
            if a is None or b is None or \
                    abs(a - b) > value_errors.stat_allowance(ss, exp, rtol, atol):
                return None
    cand_err, ref_err = np.abs(cg - cs), np.abs(e64[judged] - cs)
    return {"ok": True, "reason": None, "rule": "tolerance", "ref_mismatches": 0,
            "compared": int(judged.sum()), "cand_err_norm": value_errors.norm(cand_err),
            "ref_err_norm": value_errors.norm(ref_err), "shadow_norm": value_errors.norm(cs)}
