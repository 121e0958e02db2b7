"""The verdict on the reviewer's extra trials (extra_trials.py; docs/agents.md), in the worker:
each call of a proposal that was run judged as a regular trial is (compare.py's tolerances and
shadow, inputs left unchanged, no output aliasing an input or an earlier output); a kernel that
fails one fails with EREVIEW."""
from . import compare
from ..common.digest import attach_frame
from ..common.extra_trials import KIND, plan
from .verdict import fail


def check(result, spec, ref_trials, cand_outcome, rtol, atol, sample_seed):
    """result["review"]: {proposals, passed, refused, failed}; False (and the failure EREVIEW
    set) when the kernel fails a call of a proposal that was run."""
    extra = spec.get("extra_trials") or {}
    proposals = extra.get("proposals") or []
    entries = plan(spec, 0, 0)
    review = {"proposals": len(proposals) + len(extra.get("refused") or []), "passed": [],
              "refused": list(extra.get("refused") or [])}
    result["review"] = review
    refs = [(i, r) for i, r in sorted(ref_trials.items()) if r.get("kind") == KIND]
    by_trial = {}
    for obj, arrays in cand_outcome.of_type("trial"):
        by_trial[obj.get("trial")] = (obj, arrays)
    per = {}
    for (i, ref), entry in zip(refs, entries):
        per.setdefault(entry["proposal"], []).append((i, ref, entry))
    judged = []  # every refusal is recorded before the first failure ends the verdict
    for k, p in enumerate(proposals):
        calls = per.get(k) or []
        skipped = [r.get("reason") for _, r, _ in calls if r.get("skipped")]
        if skipped or len(calls) < len(p["calls"]):
            review["refused"].append({"id": p["id"], "reason": skipped[0] if skipped
                                      else "not every call was planned", "proposal": p})
        else:
            judged.append((p, calls))
    for p, calls in judged:
        for i, ref, entry in calls:
            why = _call_failure(by_trial.get(i), ref, rtol, atol, sample_seed)
            if why:
                review["failed"] = {"id": p["id"], "call": entry["call_index"] + 1,
                                    "reason": why, "proposal": p}
                return not fail(result, "correctness", "EREVIEW", "reviewer input %s, call %d "
                                "of %d: %s" % (p["id"], entry["call_index"] + 1, len(p["calls"]),
                                               why))
        review["passed"].append(p["id"])
    return True


def _call_failure(got, ref, rtol, atol, sample_seed):
    """Why the candidate's call failed where the reference's ran, or None."""
    if got is None:
        return "the call did not run"
    obj, arrays = got
    if obj.get("error"):
        return obj["error"]
    attach_frame(obj, arrays, ("outputs",))  # verdict.check_trials leaves these frames to us
    ok, summary = compare.compare_outputs(obj.get("outputs") or [], ref["outputs"], rtol, atol,
                                          sample_seed, ref.get("shadow"))
    if not ok:
        return summary.get("reason") or "the outputs differ"
    after, given = obj.get("inputs_after") or [], ref["inputs"]
    if len(after) != len(given) or not all(compare.same_digest(a, b) for a, b in zip(after, given)):
        return "the candidate wrote into an input"
    if obj.get("alias_input") or obj.get("alias_prev"):
        return "an output shares memory with %s" % (
            "an input" if obj.get("alias_input") else "an earlier call's output")
    return None
