"""The compare op, worker side: several verified candidates timed interleaved in one child
(interleave.py runs them there), each output checked, each timing under the trust rules, and a
speedup per A B | B A pair of blocks. Runs in the worker, which never executes candidate code."""
import statistics
import time

from ..common import loader, timing
from ..judge import compare, static_checks, timed_verdict, trust, verdict
from . import job_spec
from ..common.request import BadRequest


def run(ev, job):
    """Times candidates interleaved in one process (blocks A B ... B A on the same inputs)
    and reports each one's timing and its speedup over the first, per block."""
    t0 = time.monotonic()
    cands = (job or {}).get("candidates") if isinstance(job, dict) else None
    if not isinstance(cands, list) or len(cands) < 2 or len(cands) > 8 or not all(
            isinstance(c, str) and c for c in cands):
        raise BadRequest("candidates must be a list of 2 to 8 paths or source texts")
    spec = job_spec.normalize(ev, "benchmark", dict(job, candidate=cands[0]))
    if int(job.get("rounds", 8)) % 2:
        raise BadRequest("rounds must be even: blocks are compared in A B | B A pairs")
    spec.update(op="compare", candidates=cands, audit=False,
                rounds=int_in(job, "rounds", 8, 2, 100),
                calls_per_block=int_in(job, "calls_per_block", 5, 1, 100))
    result = {"ok": False, "stage": "load", "checks": {}, "flags": [], "audit": {},
              "device": ev.device, "dtype": spec["dtype"]}
    try:
        _compare(ev, spec, result)
    finally:
        result["elapsed"] = time.monotonic() - t0
    return result

def _compare(ev, spec, result):
    for k, cand in enumerate(spec["candidates"]):
        source, _ = loader.source_of(cand)
        rejects = static_checks.rejecting(static_checks.scan(source), not ev.cuda)
        if rejects:
            return verdict.fail(result, "audit", "ESTATIC", "candidate %d: %s at line %d" % (
                k + 1, rejects[0]["rule"], rejects[0]["line"]))
    ref_trials, _, err = ev.refs.get(spec)
    if err:
        return verdict.fail(result, "load", "EREFERENCE", err)
    rtol, atol = compare.tolerances(spec["dtype"], spec["rtol"], spec["atol"], spec["tolerance"])
    spec["input_contract"] = ref_trials[0].get("input_contract")
    out = ev.run_candidate(spec)
    if verdict.failure_from_outcome(result, out):
        return result
    timed = sorted(out.of_type("timed"), key=lambda m: m[0].get("index", 0))
    if len(timed) != len(spec["candidates"]):
        return verdict.fail(result, "benchmark", "ERUN", "%d of %d candidates were timed" % (
            len(timed), len(spec["candidates"])))
    peaks = ev.refs.peaks(spec)
    entries, untrusted = [], []
    for k, (msg, arrays) in enumerate(timed):
        entry = {"flags": []}
        # the last output whole (a candidate wrong on every call is a mismatch), then each
        # call's against its input set's reference (no trials of its own here: the candidates
        # were verified by their own jobs)
        last = ref_trials.get(timed_verdict.last_call_trial(msg), ref_trials[0])
        if timed_verdict.apply_benchmark(entry, msg, arrays, None, last, rtol, atol,
                                         ev.sample_seed, "cuda" if ev.cuda else "cpu") or \
                timed_verdict.check_timed_outputs(entry, msg, arrays, ref_trials, {}, rtol, atol,
                                                  ev.sample_seed):
            return verdict.fail(result, entry["stage"], entry["code"], "candidate %d: %s" % (
                k + 1, entry["error"].split(": ", 1)[1]))
        roof = ev.refs.roofline(spec, ref_trials[0], entry["time_ms"].get("median"))
        # the spread is not a reason to refuse here: it is reported (cv, the block ratios'
        # p10..p90) and the promotion gate that asked for the comparison judges it
        flags = [f for f in trust.figure_flags(entry["time_ms"], roof, peaks, ev.cuda,
                                               spec["max_spread"]) if f != "spread"]
        if flags:
            untrusted.append((k, flags))
        entries.append({"time_ms": entry["time_ms"], "blocks": msg.get("blocks") or [],
                        "roofline": roof})
    if untrusted:
        k, flags = untrusted[0]
        trust.reject_untrusted(result, flags, "candidate %d" % (k + 1))
        return result
    base = entries[0]["blocks"]
    result["candidates"] = []
    for entry in entries:
        # one ratio per A B | B A pair of blocks: the order a candidate runs in within a
        # block (after which other kernel, with which caches and clocks) cancels in a pair
        bk = entry["blocks"]
        ratios = sorted((base[i] + base[i + 1]) / (bk[i] + bk[i + 1])
                        for i in range(0, min(len(base), len(bk)) - 1, 2)
                        if bk[i] + bk[i + 1] > 0)
        mean = sum(ratios) / len(ratios) if ratios else 0.0
        entry["speedup"] = {"median": _median(ratios), "min": ratios[0] if ratios else None,
                            "p10": timing.percentile(ratios, 0.1),
                            "p90": timing.percentile(ratios, 0.9), "pairs": len(ratios),
                            "ratios": ratios,
                            # the pairs' agreement: what a promotion gate asks of a gain
                            "cv": statistics.pstdev(ratios) / mean if len(ratios) > 1 and mean
                            else 0.0}
        result["candidates"].append(entry)
    result.update(ok=True, stage="done", rounds=spec["rounds"],
                  calls_per_block=spec["calls_per_block"])
    return result


def _median(values):
    return timing.percentile(sorted(values), 0.5) if values else None


def int_in(job, key, default, lo, hi):
    try:
        value = int(job.get(key, default))
    except (TypeError, ValueError):
        raise BadRequest("%s must be an integer" % key)
    if not lo <= value <= hi:
        raise BadRequest("%s must be %d..%d" % (key, lo, hi))
    return value
