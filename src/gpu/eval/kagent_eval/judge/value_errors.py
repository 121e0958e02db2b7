"""The arithmetic of the value checks (numpy only): elementwise errors against a tolerance, the
L2 norms and the whole-tensor sums' allowance. compare.py applies them to a trial's outputs, and
the shadow judge (shadow_judge.py, shadow_range.py) to the reference's own error; they live
below both so neither imports the other for them."""
import numpy as np

# relative L2 error allowed on top of the elementwise test: zeros or a constant give ~1 here
# even where every element is within atol of a tiny true output
NORM_FACTOR = 5.0


def sum_sq(x):
    """The sum of squares of a float64 array's elements, without BLAS: np.dot and np.linalg.norm
    call the BLAS library, whose own thread pool (OpenBLAS's, one thread per core) contends with
    the worker's compare threads (verdict._compare_side_by_side) on every call."""
    x = np.ravel(x)
    return float(np.einsum("i,i->", x, x))


def norm(x, x_sum_sq=None):
    """The L2 norm of a float64 array's elements (sum_sq; x_sum_sq: that sum, where the caller
    has it). Where the sum of squares overflows though every element is finite (magnitudes
    above 1e154), the norm of the elements scaled by the largest: an infinite norm would let
    every error through the tolerance and the magnitude check that scale with it."""
    s = sum_sq(x) if x_sum_sq is None else x_sum_sq
    if np.isfinite(s) or not x.size:
        return float(np.sqrt(s))
    top = float(np.max(np.abs(x)))
    if not np.isfinite(top) or top == 0.0:
        return float(np.sqrt(s))  # a non-finite element: the norm is not finite either
    return top * float(np.sqrt(sum_sq(x / top)))


def errors(g, e64, rtol, atol, e_sum_sq=None):
    """(diff, bad, ok_vals, max_abs_err, max_rel_err) of a candidate's values g (any real dtype:
    each difference is taken in float64) against float64 e64. ok_vals masks the reference's
    finite elements, or is None when all are. Every trial compares a million-element sample per
    output in the worker, so the common all-finite case skips the masks: a third of the passes
    over the data. e_sum_sq: sum_sq(e64), where the caller has it: finite, it says e64 is (a sum
    that overflowed only sends finite values the masked way, which agrees)."""
    e_finite = np.isfinite(e_sum_sq) if e_sum_sq is not None else np.isfinite(e64).all()
    if e_finite:
        out = errors_finite(g, e64, rtol, atol, e_sum_sq)
        # a non-finite element of g makes its difference so: the largest is then not finite
        if out is not None:
            return out
    return _errors_masked(g, e64, rtol, atol)


def errors_finite(g, e64, rtol, atol, e_sum_sq=None):
    """errors where e64 is finite; None where g is not."""
    with np.errstate(over="ignore", invalid="ignore"):  # past float64's range: infinite, bad
        diff = np.subtract(g, e64)
    np.abs(diff, out=diff)
    max_abs = float(diff.max()) if diff.size else 0.0
    if not np.isfinite(max_abs) and not np.isfinite(g).all():
        return None
    abs_e = np.abs(e64)
    # an element is also right when its error is small against the tensor's RMS: signed
    # inputs make long reductions cancel to near-zero outputs whose rounding error is set by
    # the magnitude of the terms, not of the result (a 1M-long bf16 dot product, for one)
    scale = norm(e64, e_sum_sq) / np.sqrt(e64.size) if e64.size else 0.0
    # every element's allowance is at least the larger of atol and rtol * scale: no error above
    # that, no element to test one by one (the common case of a correct output)
    if max_abs <= max(atol, rtol * scale):
        bad = np.zeros(diff.shape, dtype=bool)
    else:
        allowed = abs_e * rtol
        allowed += atol
        np.maximum(allowed, rtol * scale, out=allowed)
        bad = diff > allowed
    np.maximum(abs_e, 1e-30, out=abs_e)
    with np.errstate(over="ignore"):
        rel = np.divide(diff, abs_e, out=abs_e)
    rel_max = float(rel.max()) if rel.size else 0.0
    if not np.isfinite(rel_max):  # an overflowed ratio is left out, as below
        rel_max = float(rel[np.isfinite(rel)].max()) if np.isfinite(rel).any() else 0.0
    return diff, bad, None, max_abs, rel_max


def _errors_masked(g, e64, rtol, atol):
    """errors where either array holds NaN or infinity: equal non-finite values agree."""
    nan_g, nan_e = np.isnan(g), np.isnan(e64)
    with np.errstate(over="ignore", invalid="ignore"):  # inf - inf: NaN, set right below
        diff = np.abs(g - e64)
    diff[nan_g & nan_e] = 0.0
    with np.errstate(invalid="ignore"):
        same_inf = np.isinf(g) & np.isinf(e64) & (g == e64)
    diff[same_inf] = 0.0
    finite_e = np.isfinite(e64)
    n_finite = int(finite_e.sum())
    scale = norm(e64[finite_e]) / np.sqrt(n_finite) if n_finite else 0.0
    allowed = np.maximum(atol + rtol * np.abs(e64), rtol * scale)
    # an infinite reference element allows an infinite error: only the same infinity matches it
    bad = (diff > allowed) | (nan_g != nan_e) | np.isnan(diff) | (np.isinf(e64) & (g != e64))
    finite = np.isfinite(diff)
    max_abs = float(diff[finite].max()) if finite.any() else 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = diff / np.maximum(np.abs(e64), 1e-30)
    rel_ok = np.isfinite(rel)
    rel_max = float(rel[rel_ok].max()) if rel_ok.any() else 0.0
    return diff, bad, ~(nan_e | np.isinf(e64)), max_abs, rel_max


def elementwise_bad(got, exp, rtol, atol):
    """Boolean mask of the elements of two float64 arrays outside the elementwise test that
    compare_tensor applies (equal non-finite values agree)."""
    return errors(np.asarray(got, dtype=np.float64), np.asarray(exp, dtype=np.float64), rtol,
                   atol)[1]


def stat_allowance(stats, meta, rtol, atol):
    """How far a whole-tensor sum may be from the expected one."""
    return NORM_FACTOR * rtol * stats["abs_sum"] + atol * meta["numel"] * 1e-3
