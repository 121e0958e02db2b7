"""Judging a trial whose true output leaves the output dtype's range (src/gpu/eval/README.md,
"Correctness", "Trials past the dtype's range"): shadow_judge.judge_by_shadow calls it first.

A long product of large factors (a cumulative product on the "large" trial, inputs x8) passes
the largest float32 within a few dozen elements. Where it does, which element overflows first
depends on the order of the multiplications: a blocked or tree scan forms partial products that
a running product never forms, so it reaches infinity a little earlier or later, or (a running
product on a GPU) stays infinite after the true product came back into range. The reference is
one such order, not the true output; the fp64 shadow is. On such a trial an element passes when
it matches the reference as before, or the shadow: within the tolerance of it, or infinite with
its sign where the true magnitude is at least sqrt of the largest finite value (EDGE): an
intermediate of another order of evaluation can be the square of such an output. A NaN, a wrong
sign, an infinity where the true output is small, or a finite value off both is still refused.
"""
import numpy as np

from . import value_errors

# the largest finite value of each output dtype the digests name
TOP = {"float32": float(np.finfo(np.float32).max), "float16": float(np.finfo(np.float16).max),
       "bfloat16": 3.3895313892515355e38}


def edge(dtype):
    """The smallest true magnitude at which an infinite output may be another order's rounding."""
    return float(np.sqrt(TOP[dtype]))


def leaves_range(exp, e64, s64):
    """Whether the true output (the shadow) is beyond the reference dtype's largest finite value
    somewhere, or the reference is infinite where the shadow is finite: the trial took the
    computation past the dtype's range."""
    top = TOP.get(exp.get("dtype"))
    if top is None:
        return False
    s_fin = np.isfinite(s64)
    with np.errstate(invalid="ignore"):
        beyond = s_fin & (np.abs(s64) > top)
    return bool(beyond.any() or (np.isinf(e64) & s_fin).any())


def judge(exp, g64, e64, s64, rtol, atol):
    """{ok, reason, rule: "range", note, ref_mismatches, compared} for a trial past the range
    (leaves_range): every element matches the reference or the shadow (module docstring).
    A sampled output's whole-tensor sums and count of non-finite elements are not compared: on
    such a trial they are infinite, or differ by the elements that overflow in another order."""
    top, bound = TOP[exp["dtype"]], edge(exp["dtype"])
    ok_ref = ~value_errors.elementwise_bad(g64, e64, rtol, atol)
    with np.errstate(invalid="ignore", over="ignore"):
        near = np.isfinite(g64) & np.isfinite(s64) & \
            (np.abs(g64 - s64) <= atol + rtol * np.abs(s64))
        at_edge = np.isinf(g64) & (np.sign(g64) == np.sign(s64)) & (np.abs(s64) >= bound)
        over = np.abs(s64) > top
        # infinite where the true output is in range: a running product's excursions on a GPU
        ref_inf = int((np.isinf(e64) & np.isfinite(s64) & ~over).sum())
    beyond = int(over.sum())
    by_shadow = ~ok_ref & (near | at_edge)
    bad = ~ok_ref & ~by_shadow
    ref_off = int(value_errors.elementwise_bad(e64, s64, rtol, atol).sum())  # the reference's own
    res = {"ok": False, "rule": "range", "ref_mismatches": ref_off, "compared": int(g64.size)}
    if bad.any():
        k = int(np.argmax(bad))
        res["reason"] = "%d elements match neither the reference nor the true (fp64) output " \
            "(first: %r, reference %r, fp64 %r)" % (int(bad.sum()), float(g64[k]),
                                                       float(e64[k]), float(s64[k]))
        return res
    res.update(ok=True, reason=None, note=(
        "the computation leaves %s's range (of %d compared elements, the true output (fp64) is "
        "beyond it at %d and the reference infinite where the true output is finite at %d), "
        "where the order of operations decides which element overflows: %d elements were "
        "judged against the fp64 output instead of the reference (infinite with its sign where "
        "its magnitude is at least %.3g, else within the tolerance)" % (
            exp["dtype"], g64.size, beyond, ref_inf, int(by_shadow.sum()), bound)))
    return res
