"""Turns the two children's reports into the job result (worker process, trusted)."""
import math
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import audit as audit_mod
from . import compare, job_defaults, likely_cause, timed_inputs
from .digest import attach_arrays
from .timing import MAX_PAD_MS

# tolerated gap between the fastest repeated call and the fastest fresh-input call before a
# cache is suspected: a cache hit is many times faster than a miss, while an honest kernel on
# fresh copies is cold only in TLBs and caches, so a ratio of 2 leaves a wide margin; tiny
# kernels also need an absolute margin
CACHE_RATIO = 0.5
TIME_KEYS = ("median", "p10", "p90", "mean", "n", "spread", "cv", "wall_median", "all_streams",
             "hardened")
CACHE_MIN_GAP_MS = {"cuda": 0.1, "cpu": 1.0}
# threads that compare a job's trials side by side (the worker's own, not the candidate's)
COMPARE_THREADS = max(1, min(4, os.cpu_count() or 1))


def _attach(obj, arrays, keys):
    """Split a trial frame's arrays among its digest lists, in order."""
    rest = list(arrays)
    for key in keys:
        metas = obj.get(key) or []
        n = sum(1 for m in metas if m.get("kind") == "tensor")
        attach_arrays(metas, rest[:n])
        rest = rest[n:]


def reference_trials(outcome):
    """{trial index: reference trial}; a trial the reference itself could not run (a resizing
    the problem does not allow) is kept as {"skipped": True, "reason"} and skipped by both."""
    trials = {}
    for obj, arrays in outcome.of_type("trial"):
        if not obj.get("skipped"):
            _attach(obj, arrays, ("inputs", "outputs", "shadow"))
        trials[obj["trial"]] = obj
    return trials


def note_shadow(result, summary, trial, dist):
    """Lists in result["shadow_judged"] each output that passed only against the reference's
    fp32 shadow (an ill-conditioned trial, compare.judge_by_shadow), with the error norms that
    let it pass, so a reader of the result sees why."""
    for entry in summary.get("shadow") or []:
        result.setdefault("shadow_judged", []).append(dict(entry, trial=trial, distribution=dist))


def fail(result, stage, code, message):
    result.update(ok=False, stage=stage, error="%s: %s" % (code, message), code=code)
    return result


def _changed_inputs(after, ref_inputs):
    """Indices of the inputs a call left different from what it was given."""
    if len(after) != len(ref_inputs):
        return list(range(len(ref_inputs)))
    return [k for k, (a, b) in enumerate(zip(after, ref_inputs)) if not compare.same_digest(a, b)]


def _compare_side_by_side(pairs, rtol, atol, sample_seed, also=None):
    """compare_outputs of each (outputs, expected[, fp32 shadow]) pair, in order, computed on a
    few threads; each item is (ok, summary, {name: ok}) with the outcome at each of `also`'s
    tolerances ({name: (rtol, atol)}).
    Each trial's comparison reads a million-element sample per output in float64 (tens of ms);
    numpy leaves the interpreter lock while it does, so a job's eight or so trials take about
    the time of two instead of adding up on the path of every candidate."""
    def at(p, r, a):
        return compare.compare_outputs(p[0], p[1], r, a, sample_seed, p[2] if len(p) > 2 else None)

    def one(p):
        ok, summary = at(p, rtol, atol)
        return ok, summary, {name: _outcome_at(ok, rtol, atol, r, a, lambda: at(p, r, a)[0])
                             for name, (r, a) in (also or {}).items()}
    if len(pairs) < 2:
        return iter([one(p) for p in pairs])
    with ThreadPoolExecutor(max_workers=min(len(pairs), COMPARE_THREADS)) as pool:
        return iter(list(pool.map(one, pairs)))


def _outcome_at(ok, rtol, atol, r, a, compute):
    """Whether an output judged `ok` at (rtol, atol) passes at (r, a): known without comparing
    again where the tolerance is the same, looser after a pass or tighter after a failure."""
    if (r, a) == (rtol, atol):
        return ok
    if ok and r >= rtol and a >= atol:
        return True
    if not ok and r <= rtol and a <= atol:
        return False
    return compute()


# the KernelBench outcomes every verdict records: the tolerance KernelBench applies today and
# that of v0/v0.1 (compare.TOLERANCE_SETS), under the names the result gives them
KERNELBENCH_OUTCOMES = {"passes_current": "strict", "passes_v0_1": "kernelbench-v0.1"}


def _where(i, ref, replay):
    return "trial %d (%s inputs%s)" % (i, ref.get("dist"), ", replay seed %s" % replay
                                       if ref.get("kind") == "property" else "")


def skipped_trials(result, ref_trials):
    """Lists in result["skipped_trials"] each trial the reference left out, with its note: one
    outside the problem's input contract (inputs.py), one whose reference output is not finite
    where the regular trials' are, a resizing the reference rejects."""
    skipped = [{"trial": i, "kind": t.get("kind"), "distribution": t.get("dist"),
                "reason": t.get("reason")} for i, t in sorted(ref_trials.items())
               if t.get("skipped")]
    if skipped:
        result["skipped_trials"] = skipped
    drawn = [{"trial": i, "distribution": t.get("dist"), "inputs": t["as_drawn"],
              "reason": t.get("as_drawn_reason")} for i, t in sorted(ref_trials.items())
             if t.get("as_drawn") and not t.get("skipped")]
    if drawn:
        result["inputs_as_drawn"] = drawn
    contract = (ref_trials.get(0) or {}).get("input_contract")
    if contract:
        result["input_contract"] = contract


def check_trials(result, ref_trials, cand_outcome, rtol, atol, sample_seed, nonfinite="report",
                 kernelbench=None):
    """Fills checks/max errors from the regular and property trials; returns False (and sets
    the failure) on the first bad one. A "nonfinite" property trial (NaN/inf inputs) only
    rejects when nonfinite == "require"; otherwise its outcome is the check of that name. A
    value mismatch only a property trial shows fails with EPROPERTY (every regular trial comes
    first and passed). kernelbench ({dtype, tolerance, problem}): also records, over every
    judged trial, whether the verdict would be a pass at KernelBench's tolerances
    (result["kernelbench"]) and a likely cause of a small error (result["likely_cause"])."""
    checks = result["checks"]
    passed = properties = 0
    replay = result.get("replay_seed")
    skipped_trials(result, ref_trials)
    trials = []
    for obj, arrays in cand_outcome.of_type("trial"):
        i = obj.get("trial")
        ref = ref_trials.get(i) if isinstance(i, int) else None
        if ref is None or ref.get("skipped") or ref.get("kind") == "resized":
            continue
        if not obj.get("error"):
            _attach(obj, arrays, ("outputs", "inputs_after"))
        trials.append((i, obj, ref))
    also = {}
    if kernelbench:
        also = {name: compare.tolerances(kernelbench["dtype"], name=name)
                for name in KERNELBENCH_OUTCOMES.values()}
    compared = _compare_side_by_side(
        [(obj.get("outputs") or [], ref["outputs"], ref.get("shadow")) for _, obj, ref in trials
         if not obj.get("error")],
        rtol, atol, sample_seed, also)
    # every trial is looked at, past the first failure too: the KernelBench outcomes and the
    # largest errors are over all judged trials; the verdict is the first failure's
    failure = None
    kb_ok = {name: True for name in also}
    value_errors = []  # relative L2 errors of the trials failing a tolerance
    for i, obj, ref in trials:
        where = _where(i, ref, replay)
        soft = ref.get("dist") == "nonfinite" and nonfinite != "require"
        if obj.get("error"):
            if soft:
                checks["nonfinite"] = False
                result["nonfinite_mismatch"] = obj["error"]
                continue
            kb_ok = {name: False for name in kb_ok}
            failure = failure or ("ERUN", "%s: %s" % (where, obj["error"]), None)
            continue
        ok, summary, at = next(compared)
        if soft:
            checks["nonfinite"] = bool(ok)
            if not ok:
                result["nonfinite_mismatch"] = summary.get("reason")
            continue
        result["max_abs_err"] = max(result.get("max_abs_err") or 0.0, summary["max_abs_err"])
        result["max_rel_err"] = max(result.get("max_rel_err") or 0.0, summary["max_rel_err"])
        if summary.get("rel_l2_err") is not None:
            result["rel_l2_err"] = max(result.get("rel_l2_err") or 0.0, summary["rel_l2_err"])
        for name, good in at.items():
            kb_ok[name] = kb_ok[name] and good
        if not all(at.values()) or not ok:
            value_errors.append((summary.get("rel_l2_err"), summary.get("err_peak")))
        if failure:
            continue
        if not ok:
            check = summary.get("check", "values")
            checks[check] = False
            mm = dict(summary.get("mismatch") or {})
            mm.update(trial=i, distribution=ref.get("dist"), reason=summary.get("reason"),
                      seed=ref.get("seed"), kind=ref.get("kind"),
                      max_abs_err=summary["max_abs_err"], max_rel_err=summary["max_rel_err"],
                      rel_l2_err=summary.get("rel_l2_err"))
            if ref.get("shadow_note"):
                mm["shadow_note"] = ref["shadow_note"]
            result["mismatch"] = mm
            code = "EMISMATCH"
            if ref.get("kind") == "property":
                checks["properties"] = False
                code = "EPROPERTY"
            failure = (code, "%s: %s" % (where, summary.get("reason")), None)
            continue
        note_shadow(result, summary, i, ref.get("dist"))
        changed = _changed_inputs(obj.get("inputs_after") or [], ref["inputs"])
        if changed:
            checks["inputs_unchanged"] = False
            kb_ok = {name: False for name in kb_ok}
            failure = ("EMISMATCH", "%s: the candidate wrote into its input%s %s (it works in "
                       "place; the inputs must be left as they were given)" % (
                           where, "s" if len(changed) > 1 else "",
                           ", ".join(str(k) for k in changed)), None)
            continue
        if obj.get("alias_input") or obj.get("alias_prev"):
            checks["no_alias"] = False
            kb_ok = {name: False for name in kb_ok}
            what = "an input" if obj.get("alias_input") else "an earlier call's output"
            failure = ("EMISMATCH", "%s: an output shares memory with %s" % (where, what), None)
            continue
        if ref.get("kind") == "property":
            properties += 1
        else:
            passed += 1
    if kernelbench:
        _record_kernelbench(result, kernelbench, kb_ok, value_errors)
    if failure:
        return not fail(result, "correctness", failure[0], failure[1])
    result["trials"] = passed
    if properties:
        result["property_trials"] = properties
        checks["properties"] = True
    if passed:
        for key in ("shape", "dtype", "values", "magnitude", "plain_tensor", "inputs_unchanged",
                    "no_alias"):
            checks.setdefault(key, True)
        checks["no_cache"] = passed >= 2
    return True


def _record_kernelbench(result, kernelbench, kb_ok, value_errors):
    """result["kernelbench"]: the job's tolerance and whether the verdict would pass at each of
    KernelBench's; result["likely_cause"] where a small error has an evident cause (a hint)."""
    rec = {"tolerance": kernelbench["tolerance"]}
    for key, name in KERNELBENCH_OUTCOMES.items():
        rec[key] = bool(kb_ok.get(name))
    result["kernelbench"] = rec
    # a trial without an error figure (a non-finite output where the reference is finite, a
    # wrong shape) has a cause no rounding explains: no hint then
    if value_errors and all(e is not None and p is not None for e, p in value_errors):
        cause = likely_cause.of(
            kernelbench["dtype"], max(e for e, _ in value_errors), max(p for _, p in value_errors),
            likely_cause.has_matmul_or_conv(likely_cause.read_source(kernelbench.get("problem"))))
        if cause:
            result["likely_cause"] = cause


def check_generalization(result, ref_trials, cand_outcome, rtol, atol, sample_seed):
    """result["generalizes"]: "yes" when the candidate verifies on every resized problem the
    reference could run, "no" when one mismatches or fails, "n/a" when none was run."""
    resized = {i: r for i, r in ref_trials.items()
               if r.get("kind") == "resized" and not r.get("skipped")}
    seen, failures = 0, []
    for obj, arrays in cand_outcome.of_type("trial"):
        ref = resized.get(obj.get("trial"))
        if ref is None:
            continue
        seen += 1
        if obj.get("error"):
            failures.append({"sizes": ref.get("sizes"), "reason": obj["error"]})
            continue
        _attach(obj, arrays, ("outputs", "inputs_after"))
        ok, summary = compare.compare_outputs(obj.get("outputs") or [], ref["outputs"], rtol, atol,
                                              sample_seed, ref.get("shadow"))
        if not ok:
            failures.append({"sizes": ref.get("sizes"), "reason": summary.get("reason")})
        else:
            note_shadow(result, summary, obj.get("trial"), ref.get("dist"))
    if not resized or not seen:
        result["generalizes"] = "n/a"
    elif failures or seen < len(resized):
        result["generalizes"] = "no"
        result["generalization"] = failures or [{"reason": "not every resized trial ran"}]
    else:
        result["generalizes"] = "yes"
        result["generalization"] = [{"sizes": r.get("sizes")} for r in resized.values()]


def failure_from_outcome(result, outcome, stage_map=None):
    """A crash, hang or exception in the candidate's process."""
    stage = {"start": "load", "build": "load", "gate_shared": "load",
             "warmup": "benchmark", "benchmark_loop": "benchmark",
             "benchmark_probe": "benchmark", "benchmark_check": "benchmark",
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


STOP_FIELDS = {"rule": str, "by": str, "calls": int, "ci_rel": float, "ci_target": float,
               "budget_s": float}


def stop_report(stop):
    """Why the timed loop stopped (timing.StopRule.report), as the child said: its known fields
    of their types only (the child may run candidate code; the figure rules do not read it)."""
    if not isinstance(stop, dict):
        return None
    out = {}
    for k, kind in STOP_FIELDS.items():
        v = stop.get(k)
        if kind is str and isinstance(v, str):
            out[k] = v[:16]
        elif kind is not str and isinstance(v, (int, float)) and not isinstance(v, bool) \
                and math.isfinite(v):
            out[k] = kind(v)
    return out


def apply_benchmark(result, bench_msg, bench_arrays, loop_ms, ref_trial0, rtol, atol, sample_seed,
                    mode="cuda"):
    t = bench_msg.get("time_ms") or {}
    result["time_ms"] = {k: t.get(k) for k in TIME_KEYS + ("fresh_ms", "repeat_ms")}
    result["time_ms"]["loop_ms"] = loop_ms
    result["time_ms"]["stop"] = stop_report(t.get("stop"))
    metas = bench_msg.get("last_outputs") or []
    attach_arrays(metas, bench_arrays)
    ok, summary = compare.compare_outputs(metas, ref_trial0["outputs"], rtol, atol, sample_seed,
                                          ref_trial0.get("shadow"))
    if not ok:
        return fail(result, "benchmark", "EMISMATCH",
                    "the output of the timed calls is wrong: %s" % summary.get("reason"))
    note_shadow(result, summary, "benchmark", ref_trial0.get("dist"))
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
        # the loop stage ran n timed calls (and, in the hardened re-measure, a warm-up call, a
        # launch-time probe and a first timed call), each after a flush and a launch pad of at
        # most MAX_PAD_MS
        per_call = loop_ms / (n + 3)
        if per_call > 3 * max(median, t.get("mean") or 0.0) + 1.0 + MAX_PAD_MS:
            result["flags"].append("timing_mismatch")
            return fail(result, "benchmark", "ETAMPER",
                        "timed calls took %.4g ms each by the worker's clock, %.4g ms reported" % (
                            per_call, median))
    return None


def last_call_trial(bench_msg):
    """The trial whose inputs the last timed call ran on (its output travels whole)."""
    report = bench_msg.get("timed_outputs") or {}
    calls, sets = report.get("calls") or [], report.get("sets") or [0]
    last = calls[-1] if calls else 0
    return sets[last] if isinstance(last, int) and 0 <= last < len(sets) else sets[0]


def check_timed_outputs(result, bench_msg, bench_arrays, ref_trials, own_trials, rtol, atol,
                        sample_seed):
    """Every timed call's output sample against the reference output of the input set it ran on
    (timed_inputs.py). An element passes when it is within the job's tolerance of the reference
    or of the candidate's own verified output on those inputs. A call on fresh inputs (the
    hardened re-measure), whose output nobody knows, must not repeat the call before it. Fails
    the job (ESTALE, stage "timing", no figure left) on the first call that does neither; None
    when every call passed. Samples that did not come back fail it too."""
    report = bench_msg.get("timed_outputs")
    if not isinstance(report, dict):
        return _stale(result, "the timed calls' outputs were not reported")
    layout, calls, sets = report.get("layout") or [], report.get("calls") or [], \
        report.get("sets") or []
    n_tensors = sum(1 for m in bench_msg.get("last_outputs") or [] if m.get("kind") == "tensor")
    width = sum(int(e["count"]) for e in layout)
    info = {"calls": len(calls), "sets": list(sets), "sampled_per_call": width}
    if len(sets) < 2 and report.get("kind") == "rotation":
        info["note"] = ("one input set fitted in memory: a call that repeats the last output "
                        "cannot be told from a right one")
    result["timed_outputs"] = info
    if not layout:
        return None  # no tensor output to sample: the trials checked the values
    rest = list(bench_arrays)[n_tensors:]
    if len(calls) != report.get("rows") or not rest or rest[0] is None or \
            rest[0].size != width * len(calls):
        return _stale(result, "%s of %d timed calls' output samples came back" % (
            "none" if not rest else "not all", len(calls)))
    rows = np.asarray(rest[0], dtype=np.float64).reshape(len(calls), width)
    expected = {}
    for s_idx, trial in enumerate(sets):
        ref, own = ref_trials.get(trial) or {}, own_trials.get(trial) or {}
        expected[s_idx] = (_sampled(ref.get("outputs"), layout, sample_seed),
                           _sampled(own.get("outputs"), layout, sample_seed))
    depends = _depends_on_inputs(ref_trials, layout, sample_seed)
    off = _off_counts(rows, calls, expected, rtol, atol)
    checked = 0
    for i, s_idx in enumerate(calls):
        if s_idx is None:  # fresh inputs: nobody knows the output, but it is not the last one
            if i > 0 and depends and np.array_equal(rows[i], rows[i - 1], equal_nan=True):
                return _stale(result, "timed call %d of %d returned the same output as the call "
                                      "before it on new inputs" % (i + 1, len(calls)))
            continue
        if off[i] < 0:
            return _stale(result, "timed call %d of %d ran on input set %s, whose reference is "
                                  "unknown" % (i + 1, len(calls), s_idx))
        checked += 1
        if off[i] > 0:
            return _stale(result, "timed call %d of %d (input set %d, the inputs of trial %d) "
                                  "returned %d of %d sampled elements off its inputs' output" % (
                                      i + 1, len(calls), s_idx + 1, sets[s_idx], int(off[i]),
                                      width))
    info["checked_calls"] = checked
    return None


def _off_counts(rows, calls, expected, rtol, atol):
    """Per timed call: how many of its sampled elements are off both its set's reference and
    the candidate's own verified output (-1: the set's reference is unknown; 0 for fresh-input
    calls). Each set's calls are compared in one pass (a thousand calls cost one comparison per
    set, not a thousand); the tolerance's RMS term is the reference row's either way."""
    off = np.zeros(len(calls), dtype=np.int64)
    width = rows.shape[1] if rows.ndim == 2 else 0
    for s_idx in {c for c in calls if c is not None}:
        idx = np.array([i for i, c in enumerate(calls) if c == s_idx])
        ref, own = expected.get(s_idx, (None, None))
        if ref is None:
            off[idx] = -1
            continue
        block = rows[idx].reshape(-1)
        bad = compare.elementwise_bad(block, np.tile(ref, len(idx)), rtol, atol)
        if own is not None:
            bad &= compare.elementwise_bad(block, np.tile(own, len(idx)), rtol, atol)
        off[idx] = bad.reshape(len(idx), width).sum(axis=1)
    return off


def _sampled(metas, layout, sample_seed):
    """One row of a trial's output values at the per-call sample's positions, or None."""
    if not metas:
        return None
    parts = []
    for e in layout:
        m = metas[e["index"]] if e["index"] < len(metas) else None
        if not m or m.get("kind") != "tensor" or m.get("data") is None or \
                int(m.get("numel") or -1) != int(e["numel"]) or bool(m.get("full")) != e["full"]:
            return None
        idx, _ = timed_inputs.call_positions(int(e["numel"]), e["full"], sample_seed)
        parts.append(np.asarray(m["data"], dtype=np.float64)[idx])
    return np.concatenate(parts) if parts else None


def _depends_on_inputs(ref_trials, layout, sample_seed):
    """Whether the reference's sampled output differs between two regular trials (a problem
    whose output ignores its input values repeats itself honestly)."""
    rows = [_sampled(t.get("outputs"), layout, sample_seed) for _, t in sorted(ref_trials.items())
            if t.get("kind", "regular") == "regular" and not t.get("skipped")]
    rows = [r for r in rows if r is not None]
    return any(not np.array_equal(rows[0], r, equal_nan=True) for r in rows[1:])


def _stale(result, message):
    result["flags"] = list(result.get("flags") or []) + ["stale_output"]
    result.setdefault("checks", {})["timed_outputs"] = False
    return fail_without_figures(result, "timing", "ESTALE", message + " (a stale output, or "
                                "one that depends on the call count or an input's address)")


def apply_baselines(result, base):
    if not base:
        return
    for name in job_defaults.BASELINES:
        if isinstance(base.get(name), dict):
            result[name + "_ms"] = base[name]["median"]
            result.setdefault("baseline_times", {})[name] = {
                k: base[name].get(k) for k in TIME_KEYS}
            if base.get("do_bench", {}).get(name):
                result["baseline_times"][name]["do_bench_mean"] = base["do_bench"][name]
        if base.get(name + "_error"):
            result.setdefault("baseline_errors", {})[name] = base[name + "_error"]
    if base.get("do_bench"):
        result["do_bench"] = base["do_bench"]
    speedups(result)


def speedups(result):
    med = (result.get("time_ms") or {}).get("median")
    if not med:
        return
    for name in job_defaults.BASELINES:
        if result.get(name + "_ms"):
            result["speedup_vs_" + name] = result[name + "_ms"] / med


# -- fail closed ---------------------------------------------------------------------------
# Every flag that says a timing cannot be trusted, what it sets off, and the reason given when a
# candidate is rejected for it. "remeasure": a hardened re-measure in a fresh process (fresh
# inputs before every call, persisting L2 reset, all streams traced); the figure is accepted only
# if the re-measure raises none of these flags and agrees with the first. "trigger": a property
# of the code, not of the figure; it sets off the re-measure, whose own flags then decide.
# "reject": final.
TRUST_RULES = {
    "outside_timed_stream": ("remeasure", "device work ran outside the timed events (on another "
                                          "stream or after the call returned)"),
    "all_streams_unchecked": ("remeasure", "the timing could not check every stream"),
    "untimed_work": ("remeasure", "the host clock saw far more time than the events"),
    "beyond_sol": ("remeasure", "faster than the speed-of-light bound allows (its compulsory "
                                "memory traffic at the measured bandwidth)"),
    "spread": ("remeasure", "the timed calls vary too much (p90/p10 above the limit)"),
    "threads_started": ("trigger", "the candidate started threads"),
    "static:streams_threads": ("trigger", "the candidate uses streams or threads"),
    "remeasure_disagrees": ("reject", "a fresh hardened re-measure disagrees with the first"),
    "stale_output": ("reject", "a timed call returned an output that is not its inputs' "
                               "(ESTALE)"),
}
# p90/p10 of honest GPU timings stays far below 1.5. CPU mode's wall clock on a shared machine
# measures the machine as much as the kernel (sub-millisecond calls, the OS scheduler, other
# jobs on two cores), so only a spread no scheduler explains is refused there
MAX_SPREAD = {"cuda": 1.5, "cpu": 10.0}
# a re-measure may differ from the first by this much (or by their spreads). In CPU mode there is
# no cache flush between calls, so the hardened loop's fresh inputs before every call are a real
# difference: a 0.05-0.1 ms call measured 1.3-2.8x slower hardened on a loaded two-core machine
AGREE_TOLERANCE = {"cuda": 0.10, "cpu": 2.0}
# A hardened re-measure whose only objections are ones a busy machine raises too (a wide spread,
# disagreeing with the first) is taken once more, and that one decides: a candidate that
# behaves differently when watched does so again, noise seldom twice in a row
NOISE_FLAGS = frozenset(("spread", "remeasure_disagrees"))
HARDENED_TRIES = 2


def sol_limit_pct(peaks):
    """Highest speed-of-light % of the compulsory memory traffic a figure may show: 100 plus the
    read-over-copy bandwidth headroom measured on this GPU (a read-heavy kernel can beat the
    copy bandwidth the bound is made of). A physical bound: it does not move with the timing's
    spread, which has a rule of its own."""
    headroom = 0.0
    copy, read = (peaks or {}).get("dram_bytes_per_s"), (peaks or {}).get("dram_read_bytes_per_s")
    if copy and read:
        headroom = max(0.0, read / copy - 1.0)
    return 100.0 * (1.0 + headroom)


def figure_flags(time_ms, roofline, peaks, cuda, max_spread=None):
    """Flags (in TRUST_RULES) raised by one timing summary."""
    t = time_ms or {}
    if max_spread is None:
        max_spread = MAX_SPREAD["cuda" if cuda else "cpu"]
    flags = []
    streams = t.get("all_streams")
    if cuda:
        if not isinstance(streams, dict) or not streams.get("checked"):
            flags.append("all_streams_unchecked")
        elif not streams.get("ok"):
            flags.append("outside_timed_stream")
    if t.get("untimed_work"):
        flags.append("untimed_work")
    if t.get("spread") and t["spread"] > max_spread:
        flags.append("spread")
    # the compulsory bytes bind every correct kernel; the reference's FLOPs do not (roofline.py)
    roof = roofline or {}
    sol = roof.get("memory_sol_pct", roof.get("sol_pct"))
    if sol and sol > sol_limit_pct(peaks):
        flags.append("beyond_sol")
    return flags


def needs_remeasure(flags):
    return any(TRUST_RULES.get(f, ("",))[0] in ("remeasure", "trigger") for f in flags)


def agree(first, second, cuda=True):
    """True when two medians agree within AGREE_TOLERANCE or their own spreads."""
    a, b = (first or {}).get("median"), (second or {}).get("median")
    if not a or not b:
        return False
    spreads = max((first.get("spread") or 1.0), (second.get("spread") or 1.0)) - 1.0
    return abs(a - b) / min(a, b) <= max(AGREE_TOLERANCE["cuda" if cuda else "cpu"], spreads)


def untrusted_reason(flags):
    """The rejection text naming every cause (figures are not repeated: they are untrusted)."""
    why = [TRUST_RULES[f][1] for f in flags if f in TRUST_RULES]
    return "; ".join(why)


FIGURES = ("time_ms", "roofline", "speedup_vs_eager", "speedup_vs_compile",
           "speedup_vs_compile_max_autotune")


def fail_without_figures(result, stage, code, message):
    """Fails the job and takes the candidate's figures off the result (a timing that was never
    confirmed is never ranked, archived or reported)."""
    for key in FIGURES:
        result.pop(key, None)
    return fail(result, stage, code, message)


def reject_untrusted(result, flags, detail=None):
    """Fails the job at stage "timing", naming every cause, with no figure left on it."""
    result["trust"] = dict(result.get("trust") or {}, rejected=sorted(set(flags)), detail=detail)
    msg = untrusted_reason(flags)
    if detail:
        msg += " (%s)" % detail
    return fail_without_figures(result, "timing", "EUNTRUSTED", msg)
