"""Turns the two children's reports into the job result (worker process, trusted): the trials,
the failures. The kernel audit: verdict_library.py; the timing's checks: timed_verdict.py; the
trust rules: trust.py."""
import os
from concurrent.futures import ThreadPoolExecutor

from . import compare, likely_cause
from ..profile import pyprofile
from ..common.digest import attach_frame

# threads that compare a job's trials side by side (the worker's own, not the candidate's); one
# where the worker's Python is profiled (pyprofile.py), so its listing shows the comparisons
# rather than a wait on the threads that ran them
COMPARE_THREADS = 1 if pyprofile.enabled() else max(1, min(4, os.cpu_count() or 1))


def reference_trials(outcome):
    """{trial index: reference trial}; a trial the reference itself could not run (a resizing
    the problem does not allow) is kept as {"skipped": True, "reason"} and skipped by both."""
    trials = {}
    for obj, arrays in outcome.of_type("trial"):
        if not obj.get("skipped"):
            attach_frame(obj, arrays, ("outputs", "shadow"))
        trials[obj["trial"]] = obj
    return trials


def note_shadow(result, summary, trial, dist):
    """Lists in result["shadow_judged"] each output that passed only against the reference's
    shadow (an ill-conditioned trial, shadow_judge.judge_by_shadow), with the error norms that
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


def trial_comparer(rtol, atol, sample_seed, kernelbench=None):
    """The comparison of one trial: (outputs, expected[, shadow[, property trial[, judged]]]) ->
    (ok, summary, {name: ok}), with the outcome at each KernelBench tolerance where `kernelbench`
    is given (check_trials) and the trial is judged (not a soft non-finite one, whose outcome is
    a check of its own: none then). Pure: its outcome does not depend on when or where it runs
    (early_checks.py runs it while the candidate's process is still timing)."""
    also = kernelbench_tolerances(kernelbench)

    def at(p, r, a):
        return compare.compare_outputs(p[0], p[1], r, a, sample_seed, p[2] if len(p) > 2 else None,
                                       len(p) > 3 and p[3])

    def one(p):
        ok, summary = at(p, rtol, atol)
        judged = len(p) < 5 or p[4]
        return ok, summary, {name: _outcome_at(ok, rtol, atol, r, a, lambda: at(p, r, a)[0])
                             for name, (r, a) in also.items() if judged}
    return one


def kernelbench_tolerances(kernelbench):
    """{outcome name: (rtol, atol)} of the KernelBench outcomes a verdict records, or {}."""
    if not kernelbench:
        return {}
    return {name: compare.tolerances(kernelbench["dtype"], name=name)
            for name in KERNELBENCH_OUTCOMES.values()}


def trial_pair(obj, arrays, ref_trials, nonfinite="report"):
    """What check_trials compares for one of the candidate's trial frames, its arrays attached:
    (outputs, expected, shadow, property trial, judged), or None where that trial is not compared
    here (it failed to run, the reference left it out, or another check judges it). judged:
    False for the trial of non-finite inputs unless the job requires it (soft_nonfinite)."""
    ref = judged_ref(obj, ref_trials)
    if ref is None or obj.get("error"):
        return None
    i = obj["trial"]
    for key in ("outputs", "inputs_after"):
        metas = obj.get(key) or []
        if not isinstance(metas, list) or not all(isinstance(m, dict) for m in metas):
            raise BadFrame("trial %d's %s are not a list of digests" % (i, key))
    attach_frame(obj, arrays, ("outputs",))
    return (obj.get("outputs") or [], ref["outputs"], ref.get("shadow"), ref.get("kind") == "property",
            not soft_nonfinite(ref, nonfinite))


def judged_ref(obj, ref_trials):
    """The reference trial check_trials judges a candidate's trial frame against, or None where
    it does not judge that trial (the reference left it out; a resized or reviewer trial, which
    checks of their own judge)."""
    i = obj.get("trial")
    ref = ref_trials.get(i) if isinstance(i, int) else None
    if ref is None or ref.get("skipped") or ref.get("kind") in ("resized", "review"):
        return None
    return ref


class BadFrame(ValueError):
    """A trial frame out of shape: only a candidate's own code can have sent it."""


def soft_nonfinite(ref, nonfinite):
    """A trial of non-finite inputs whose outcome is only the check "nonfinite" (the job does not
    require it): no KernelBench outcome, no largest error, no failure comes of it."""
    return ref.get("dist") == "nonfinite" and nonfinite != "require"


def _compare_side_by_side(pairs, one, done=()):
    """one(pair) of each pair, in order, computed on a few threads; `done`: outcomes already
    known, by position (None where not), taken as they are.
    Each trial's comparison reads a million-element sample per output in float64 (tens of ms);
    numpy leaves the interpreter lock while it does, so a job's eight or so trials take about
    the time of two instead of adding up on the path of every candidate."""
    done = list(done) + [None] * (len(pairs) - len(done))
    todo = [p for p, d in zip(pairs, done) if d is None]
    if len(todo) < 2 or COMPARE_THREADS < 2:
        fresh = [one(p) for p in todo]
    else:
        with ThreadPoolExecutor(max_workers=min(len(todo), COMPARE_THREADS)) as pool:
            fresh = list(pool.map(one, todo))
    fresh = iter(fresh)
    return iter([d if d is not None else next(fresh) for d in done])


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
                 kernelbench=None, early=None):
    """Fills checks/max errors from the regular and property trials; returns False (and sets
    the failure) on the first bad one. A "nonfinite" property trial (NaN/inf inputs) only
    rejects when nonfinite == "require"; otherwise its outcome is the check of that name. A
    value mismatch only a property trial shows fails with EPROPERTY (every regular trial comes
    first and passed). kernelbench ({dtype, tolerance, problem}): also records, over every
    judged trial, whether the verdict would be a pass at KernelBench's tolerances
    (result["kernelbench"]) and a likely cause of a small error (result["likely_cause"]).
    early: the comparisons early_checks.EarlyTrials started while the process ran (built with the
    same tolerances and kernelbench), taken where there is one."""
    checks = result["checks"]
    passed = properties = 0
    replay = result.get("replay_seed")
    skipped_trials(result, ref_trials)
    trials, pairs, done = [], [], []
    for obj, arrays in cand_outcome.of_type("trial"):
        ref = judged_ref(obj, ref_trials)
        if ref is None:
            continue
        trials.append((obj["trial"], obj, ref))
        try:
            pair = trial_pair(obj, arrays, ref_trials, nonfinite)
        except BadFrame as e:
            return not fail(result, "run", "EWORKER", "bad data from the sandbox: %s" % e)
        if pair is not None:
            pairs.append(pair)
            done.append(early.outcome(obj) if early is not None else None)
    also = kernelbench_tolerances(kernelbench)
    compared = _compare_side_by_side(pairs, trial_comparer(rtol, atol, sample_seed, kernelbench),
                                     done)
    # every trial is looked at, past the first failure too: the KernelBench outcomes and the
    # largest errors are over all judged trials; the verdict is the first failure's
    failure = None
    kb_ok = {name: True for name in also}
    value_errors = []  # relative L2 errors of the trials failing a tolerance
    for i, obj, ref in trials:
        where = _where(i, ref, replay)
        soft = soft_nonfinite(ref, nonfinite)
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
        unjudged = [e for e in summary.get("shadow") or [] if e.get("rule") == "unjudged"]
        if unjudged:  # shadow_judge._unjudged: listed with the trials the reference left out
            result.setdefault("skipped_trials", []).append(
                {"trial": i, "kind": ref.get("kind"), "distribution": ref.get("dist"),
                 "reason": "output %d: %s" % (unjudged[0]["output_index"], unjudged[0]["note"])})
            summary = dict(summary, shadow=[e for e in summary["shadow"] if e not in unjudged])
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
            properties += 0 if unjudged else 1
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
        attach_frame(obj, arrays, ("outputs",))
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
    stage = {"start": "load", "build": "load", "gate_shared": "load", "compile_source": "load",
             "warmup": "benchmark", "benchmark_loop": "benchmark",
             "benchmark_trace": "benchmark", "benchmark_probe": "benchmark",
             "benchmark_check": "benchmark",
             "roofline": "benchmark"}.get(
        outcome.stage, outcome.stage)
    if outcome.failure:
        code, msg = outcome.failure
        return fail(result, stage, code, msg)
    err, _ = outcome.first("error")
    if err:
        text = "%s: %s" % (err.get("error_type"), err.get("message"))
        low = text.lower()
        if err.get("error_type") == "CompileError":  # a build its own process made (ext_build)
            code = "ECOMPILE"
        elif "cuda error" in low or "illegal memory access" in low or "device-side assert" in low \
                or "misaligned address" in low:
            code = "ECUDA"
        elif stage == "load":
            code = "ELOAD"
        else:
            code = "ERUN"
        result["traceback"] = err.get("traceback")
        return fail(result, stage, code, text)
    return None
