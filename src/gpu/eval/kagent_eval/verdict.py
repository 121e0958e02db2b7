"""Turns the two children's reports into the job result (worker process, trusted)."""
from . import audit as audit_mod
from . import compare
from .digest import attach_arrays
from .timing import MAX_PAD_MS

# tolerated gap between the fastest repeated call and the fastest fresh-input call before a
# cache is suspected: a cache hit is many times faster than a miss, while an honest kernel on
# fresh copies is cold only in TLBs and caches, so a ratio of 2 leaves a wide margin; tiny
# kernels also need an absolute margin
CACHE_RATIO = 0.5
CACHE_MIN_GAP_MS = {"cuda": 0.1, "cpu": 1.0}


def _attach(obj, arrays, keys):
    """Split a trial frame's arrays among its digest lists, in order."""
    rest = list(arrays)
    for key in keys:
        metas = obj.get(key) or []
        n = sum(1 for m in metas if m.get("kind") == "tensor")
        attach_arrays(metas, rest[:n])
        rest = rest[n:]


def reference_trials(outcome):
    trials = []
    for obj, arrays in outcome.of_type("trial"):
        _attach(obj, arrays, ("inputs", "outputs"))
        trials.append(obj)
    return trials


def fail(result, stage, code, message):
    result.update(ok=False, stage=stage, error="%s: %s" % (code, message), code=code)
    return result


def check_trials(result, ref_trials, cand_outcome, rtol, atol, sample_seed):
    """Fills checks/max errors; returns False (and sets the failure) on the first bad trial."""
    checks = result["checks"]
    passed = 0
    for obj, arrays in cand_outcome.of_type("trial"):
        _attach(obj, arrays, ("outputs", "inputs_after"))
        i = obj.get("trial")
        if not isinstance(i, int) or not 0 <= i < len(ref_trials):
            return not fail(result, "correctness", "EMISMATCH", "unexpected trial report")
        ref = ref_trials[i]
        ok, summary = compare.compare_outputs(obj.get("outputs") or [], ref["outputs"], rtol, atol,
                                              sample_seed)
        result["max_abs_err"] = max(result.get("max_abs_err") or 0.0, summary["max_abs_err"])
        result["max_rel_err"] = max(result.get("max_rel_err") or 0.0, summary["max_rel_err"])
        if not ok:
            check = summary.get("check", "values")
            checks[check] = False
            mm = dict(summary.get("mismatch") or {})
            mm.update(trial=i, distribution=ref.get("dist"), reason=summary.get("reason"))
            result["mismatch"] = mm
            return not fail(result, "correctness", "EMISMATCH", "trial %d (%s inputs): %s" % (
                i, ref.get("dist"), summary.get("reason")))
        after = obj.get("inputs_after") or []
        if len(after) != len(ref["inputs"]) or not all(
                compare.same_digest(a, b) for a, b in zip(after, ref["inputs"])):
            checks["inputs_unchanged"] = False
            return not fail(result, "correctness", "EMISMATCH",
                            "trial %d: the candidate changed its inputs" % i)
        if obj.get("alias_input") or obj.get("alias_prev"):
            checks["no_alias"] = False
            what = "an input" if obj.get("alias_input") else "an earlier call's output"
            return not fail(result, "correctness", "EMISMATCH",
                            "trial %d: an output shares memory with %s" % (i, what))
        passed += 1
    result["trials"] = passed
    if passed:
        for key in ("shape", "dtype", "values", "magnitude", "plain_tensor", "inputs_unchanged",
                    "no_alias"):
            checks.setdefault(key, True)
        checks["no_cache"] = passed >= 2
    return True


def failure_from_outcome(result, outcome, stage_map=None):
    """A crash, hang or exception in the candidate's process."""
    stage = {"start": "load", "benchmark_loop": "benchmark", "benchmark_check": "benchmark",
             "roofline": "benchmark"}.get(
        outcome.stage, outcome.stage)
    if outcome.failure:
        code, msg = outcome.failure
        return fail(result, stage, code, msg)
    err, _ = outcome.first("error")
    if err:
        text = "%s: %s" % (err.get("error_type"), err.get("message"))
        low = text.lower()
        if "cuda error" in low or "illegal memory access" in low or "device-side assert" in low \
                or "misaligned address" in low:
            code = "ECUDA"
        elif stage == "load":
            code = "ELOAD"
        else:
            code = "ERUN"
        result["traceback"] = err.get("traceback")
        return fail(result, stage, code, text)
    return None


def apply_audit(result, kernels, policy, threshold):
    verdict = audit_mod.classify(kernels, threshold)
    result["kernels"] = kernels
    result["audit"].update(verdict)
    if verdict["fallback"]:
        result["flags"].append("fallback")
        if policy == "reject":
            fail(result, "audit", "EFALLBACK",
                 "the candidate's own kernels carry %.0f%% of its GPU time (library kernels: %s)" % (
                     100 * verdict["own_time_frac"], ", ".join(verdict["flagged_kernels"][:3]) or "none"))
            return False
    return True


def apply_benchmark(result, bench_msg, bench_arrays, loop_ms, ref_trial0, rtol, atol, sample_seed,
                    mode="cuda"):
    t = bench_msg.get("time_ms") or {}
    result["time_ms"] = {k: t.get(k) for k in ("median", "p10", "p90", "mean", "n", "spread",
                                                "fresh_ms", "repeat_ms", "wall_median")}
    result["time_ms"]["loop_ms"] = loop_ms
    metas = bench_msg.get("last_outputs") or []
    attach_arrays(metas, bench_arrays)
    ok, summary = compare.compare_outputs(metas, ref_trial0["outputs"], rtol, atol, sample_seed)
    if not ok:
        return fail(result, "benchmark", "EMISMATCH",
                    "the output of the timed calls is wrong: %s" % summary.get("reason"))
    median = t.get("median") or 0.0
    fresh = t.get("fresh_ms")
    repeat = t.get("repeat_ms") or median
    if fresh and repeat < CACHE_RATIO * fresh and fresh - repeat > CACHE_MIN_GAP_MS[mode]:
        result["flags"].append("cache_suspect")
        return fail(result, "benchmark", "ECACHE",
                    "repeated calls take %.4g ms, calls on fresh copies of the inputs %.4g ms" % (
                        repeat, fresh))
    n = t.get("n") or 0
    if loop_ms is not None and n:
        # the loop ran n timed calls plus a warm-up, a launch-time probe and a first timed call,
        # each timed call after a flush and a launch pad of at most MAX_PAD_MS
        per_call = loop_ms / (n + 3)
        if per_call > 3 * max(median, t.get("mean") or 0.0) + 1.0 + MAX_PAD_MS:
            result["flags"].append("timing_mismatch")
            return fail(result, "benchmark", "ETAMPER",
                        "timed calls took %.4g ms each by the worker's clock, %.4g ms reported" % (
                            per_call, median))
    if t.get("untimed_work"):
        result["flags"].append("untimed_work")
    if t.get("spread") and t["spread"] > 1.1:
        result["flags"].append("noisy")
    return None


def apply_baselines(result, base):
    if not base:
        return
    for name in ("eager", "compile", "compile_max_autotune"):
        if isinstance(base.get(name), dict):
            result[name + "_ms"] = base[name]["median"]
            result.setdefault("baseline_times", {})[name] = {
                k: base[name].get(k) for k in ("median", "p10", "p90", "mean", "n", "spread")}
        if base.get(name + "_error"):
            result.setdefault("baseline_errors", {})[name] = base[name + "_error"]
    if base.get("do_bench"):
        result["do_bench"] = base["do_bench"]
    med = (result.get("time_ms") or {}).get("median")
    if med:
        if result.get("eager_ms"):
            result["speedup_vs_eager"] = result["eager_ms"] / med
        if result.get("compile_ms"):
            result["speedup_vs_compile"] = result["compile_ms"] / med
