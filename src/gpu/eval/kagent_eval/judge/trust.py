"""Fail closed: no timing is accepted before it is trusted (docs/lua-api.md, "Timing and trust").
The flags a timing can raise, what each sets off, and how a job fails for one (jobs.py applies
them, re-measuring where a rule asks for it)."""
from ..common import job_defaults
from .verdict import fail


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
    "clock_unchecked": ("trigger", "the worker's clock could not check the timed calls: the "
                                   "host's CPUs were oversubscribed while they ran (host_load.py)"),
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
# The objections a busy machine raises too (a wide spread, disagreeing with the first, a clock the
# host's load left unchecked): a hardened re-measure with no other is followed by a control that
# tells the machine's noise from the kernel's (noise.py)
NOISE_FLAGS = frozenset(("spread", "remeasure_disagrees", "clock_unchecked"))


def sol_limit_pct(peaks):
    """Highest speed-of-light % of the compulsory memory traffic a figure may show: 100 plus the
    headroom of the fastest reading the GPU allows over the copy bandwidth the bound is made of.
    That is the memory's specified bandwidth where the driver gives it (a tuned read-only kernel,
    such as a split-K GEMV, beats both a copy and torch's sum), else the measured read-only sum.
    A physical bound: it does not move with the timing's spread, which has a rule of its own."""
    peaks = peaks or {}
    copy = peaks.get("dram_bytes_per_s")
    fastest = max([v for v in (peaks.get("dram_read_bytes_per_s"),
                               peaks.get("dram_spec_bytes_per_s")) if v] or [0.0])
    headroom = max(0.0, fastest / copy - 1.0) if copy and fastest else 0.0
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


FIGURES = ("time_ms", "roofline") + tuple("speedup_vs_" + b for b in job_defaults.BASELINES)


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
