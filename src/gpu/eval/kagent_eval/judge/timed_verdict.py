"""The worker's checks of a candidate's timing (jobs.py): the benchmark report against the
worker's own clock and the fresh-input probe, every timed call's output against its input set's
reference, and the baselines and speedups a trusted timing gets."""
import functools
import math

import numpy as np

from ..common import job_defaults, timed_inputs
from . import compare, value_errors
from ..common.cache_rule import looks_cached
from ..common.digest import attach_arrays
from ..common.timing import MAX_PAD_MS
from .trust import fail_without_figures
from .verdict import fail, note_shadow


TIME_KEYS = ("median", "p10", "p90", "mean", "n", "spread", "cv", "wall_median", "all_streams",
             "hardened")


STOP_FIELDS = {"rule": str, "by": str, "calls": int, "ci_rel": float, "ci_target": float,
               "budget_s": float}


def stop_report(stop):
    """Why the timed loop stopped (stop_rule.StopRule.report), as the child said: its known fields
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


# What the timed loop's stage costs once, beyond its calls: its first input set, and (before the
# stage "benchmark_trace" took it out, candidate_timing.TRACE_STAGE) reading the activity trace
# of the all-stream check. Seen on an H100 with the trace inside: about 0.1 s for one Triton
# kernel, 0.2-0.3 s for a composed program of several; a loop of a thousand calls hid it, the 64
# calls of the stop rule (stop_rule.StopRule) spread it at 1.5-4.5 ms a call over a 30 us kernel,
# which the per-call bound alone took for tampering. On a host running ten sweep runs, loops of
# 64 calls of 20-80 us Level 3 subgraphs took 0.3-1.2 s, how much of it in the trace's reading
# not known (docs/results/2026-11-27-gpu-levels23-e.md).
LOOP_FIXED_MS = 400.0


def apply_benchmark(result, bench_msg, bench_arrays, loop_ms, ref_trial0, rtol, atol, sample_seed,
                    mode="cuda", host_loaded=False):
    """The timing's report against the last call's output, the fresh-copy probe (ECACHE) and the
    worker's clock (ETAMPER). host_loaded: the host's CPUs were oversubscribed while the calls
    ran (host_load.py): an over-long loop is then flagged `clock_unchecked` (trust.py: re-measured,
    refused where it stays so) instead of failing as tampering."""
    metas = bench_msg.get("last_outputs") or []
    attach_arrays(metas, bench_arrays)
    ok, summary = compare.compare_outputs(metas, ref_trial0["outputs"], rtol, atol, sample_seed,
                                          ref_trial0.get("shadow"))
    if not ok:  # before any figure is put on the result: a refused timing leaves none
        return fail(result, "benchmark", "EMISMATCH",
                    "the output of the timed calls is wrong: %s" % summary.get("reason"))
    t = bench_msg.get("time_ms") or {}
    result["time_ms"] = {k: t.get(k) for k in TIME_KEYS + ("fresh_ms", "repeat_ms")}
    result["time_ms"]["loop_ms"] = loop_ms
    result["time_ms"]["stop"] = stop_report(t.get("stop"))
    note_shadow(result, summary, "benchmark", ref_trial0.get("dist"))
    median = t.get("median") or 0.0
    fresh = t.get("fresh_ms")
    repeat = t.get("repeat_ms") or median
    if fresh and looks_cached(repeat, fresh, mode):
        result["flags"].append("cache_suspect")
        return fail(result, "benchmark", "ECACHE",
                    "repeated calls take %.4g ms, calls on fresh copies of the inputs %.4g ms" % (
                        repeat, fresh))
    n = t.get("n") or 0
    if loop_ms is not None and n:
        # the loop stage ran n timed calls (and, in the hardened re-measure, a warm-up call, a
        # launch-time probe and a first timed call), each after a flush and a launch pad of at
        # most MAX_PAD_MS, plus the loop's own start and end (LOOP_FIXED_MS)
        per_call = loop_ms / (n + 3)
        allowed = 3 * max(median, t.get("mean") or 0.0) + 1.0 + MAX_PAD_MS + \
            LOOP_FIXED_MS / (n + 3)
        if per_call > allowed and host_loaded:
            result["flags"].append("clock_unchecked")
            result["clock_unchecked"] = {"per_call_ms": per_call, "reported_ms": median}
        elif per_call > allowed:
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
        bad = value_errors.elementwise_bad(block, np.tile(ref, len(idx)), rtol, atol)
        if own is not None:
            bad &= value_errors.elementwise_bad(block, np.tile(own, len(idx)), rtol, atol)
        off[idx] = bad.reshape(len(idx), width).sum(axis=1)
    return off


@functools.lru_cache(maxsize=64)
def _call_index(numel, full, sample_seed):
    """The per-call sample's indices into a digest (timed_inputs.call_positions), once per output
    shape and seed: the worker reads them for every input set and every job of a problem."""
    idx, _ = timed_inputs.call_positions(numel, full, sample_seed)
    idx.setflags(write=False)
    return idx


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
        idx = _call_index(int(e["numel"]), bool(e["full"]), sample_seed)
        parts.append(np.asarray(m["data"], dtype=np.float64)[idx])
    return np.concatenate(parts) if parts else None


# Share of sampled positions at which the reference's outputs on two inputs of the problem's own
# distribution must differ before a repeated output on fresh inputs counts as stale. A problem
# whose output is nearly constant (a long sum rounded to bf16: #4's 2^20 products land on 2^18
# at almost every element) repeats itself honestly between fresh calls; one whose output follows
# its inputs differs almost everywhere, so a repeat at every sampled position is not chance.
DEPENDS_SHARE = 0.5


def _depends_on_inputs(ref_trials, layout, sample_seed):
    """Whether the reference's sampled output differs, at DEPENDS_SHARE of the positions or more,
    between two regular trials of the problem's own distribution: what the fresh calls of the
    hardened re-measure draw from (timed_inputs.Fresh). Trials of other distributions say
    nothing of it (a sign flip or a scale changes a constant output too)."""
    rows = [_sampled(t.get("outputs"), layout, sample_seed) for _, t in sorted(ref_trials.items())
            if t.get("kind", "regular") == "regular" and not t.get("skipped")
            and t.get("dist", "own") == "own"]
    rows = [np.asarray(r) for r in rows if r is not None]
    for r in rows[1:]:
        if r.shape != rows[0].shape or not r.size:
            continue
        same = (r == rows[0]) | (np.isnan(r) & np.isnan(rows[0]))
        if 1.0 - same.mean() >= DEPENDS_SHARE:
            return True
    return False


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


def loop_ms(out):
    """Worker-clock ms the candidate spent in its timed loop: every "benchmark_loop" stretch
    (a hardened loop leaves it for "benchmark_prep" before each call)."""
    total, start = 0.0, None
    for obj, _ in out.messages:
        if obj.get("type") != "stage":
            continue
        if start is not None:
            total += obj["t"] - start
            start = None
        if obj.get("stage") == "benchmark_loop":
            start = obj["t"]
    return total * 1e3 if total > 0 else None
