"""The all-stream check of a timed loop (timing.py): did any device work of a call lie outside its
CUDA events?

The timed loop runs under an activity trace (CUPTI: every kernel, copy and fill on any stream,
from any thread) with host marks on the trace's clock, taken while the device is idle, that open
and close each call's window. In a window, the first records are the harness's flush and spin on
the timed stream; the call starts when they end (h). Work of the call that began before h ran
beside the harness, not after it, and work spanning longer than the events' time (from h or its
first record, whichever is later) ran beyond the end event: either is time the events did not
see. Work between windows (a thread launching after the call returned) is outside every window.
Honest kernels, on one stream or on side streams joined back to the timed one, leave none of
either.
"""
import statistics

# the harness's L2 flush buffer (timing.Timer zeroes it before each timed call); the check
# recognizes its fill by this size, so the fact lives here, below the timer that imports it
L2_FLUSH_BYTES = 256 << 20

# device work outside the events beyond this is an escape: event and trace timestamps of one
# kernel agree to well under a microsecond; a few-microsecond kernel on a side stream exceeds it
ESCAPE_ABS_MS = 0.0015
ESCAPE_REL = 0.002
# CUPTI puts device timestamps on the host clock by a running estimate that can be off by a
# microsecond or two; windows are widened by this much, and one odd call in a hundred is
# tolerated, one at least (a single call's escape moves no median, and an adaptive loop of a
# few dozen calls would otherwise be refused for one timestamp's jitter)
WINDOW_JITTER_NS = 2000
ESCAPE_CALL_SHARE = 0.01
# names of the harness's own kernels (the flush is a fill of the flush buffer, the spin is
# torch.cuda._sleep); only the first of each in a window, on one stream, is the harness's
_FLUSH_NAME = "FillFunctor"
_SPIN_NAME = "spin_kernel"


def _is_flush(record):
    """The flush buffer's zeroing: a fill kernel, or a memset of its size where torch uses one."""
    if record.get("kind", "kernel") == "kernel":
        return _FLUSH_NAME in record.get("name", "")
    return record.get("kind") == "memset" and record.get("name") == "memset %d B" % L2_FLUSH_BYTES


def _harness(window, has_spin):
    """(end of the harness's flush and spin in ns, their records) in one call's window."""
    flush = next((r for r in window if _is_flush(r)), None)
    if flush is None:
        return None, ()
    if not has_spin:
        return flush["end_ns"], (flush,)
    spin = next((r for r in window if r is not flush and r.get("stream") == flush.get("stream")
                 and _SPIN_NAME in r.get("name", "") and r["start_ns"] >= flush["start_ns"]),
                None)
    if spin is None:
        return None, ()
    return spin["end_ns"], (flush, spin)


def all_stream_check(records, windows, end_mark, events_ms, has_spin=True, gap_streams=(),
                     per_call=False):
    """Device work the events did not see, per timed call (see the module's docstring).

    windows: one (open_ns, close_ns) per call; end_mark: the end of the grace period after the
    last call. Work between windows and after the last one is allowed only on gap_streams (the
    harness's own input preparation and output samples). Returns {checked, ok, calls,
    escaped_calls, tolerated_calls, unchecked_calls, outside_windows, max_uncovered_ms, median_uncovered_ms, streams} (and "per_call", each
    call's uncovered ms, when asked); ok is False when more calls than tolerated_calls (1% of
    them) had work outside their events (beyond ESCAPE_ABS_MS + ESCAPE_REL of their time), work
    fell between or after the windows, or a window's harness could not be found (the call
    cannot be checked)."""
    records = sorted(records or [], key=lambda r: r["start_ns"])
    n = len(events_ms)
    res = {"checked": True, "calls": n, "escaped_calls": 0, "unchecked_calls": 0,
           "max_uncovered_ms": 0.0, "median_uncovered_ms": 0.0, "outside_windows": 0,
           "streams": sorted({r.get("stream") for r in records if r.get("stream") is not None})}
    if len(windows) != n or end_mark is None:
        res.update(checked=False, ok=False, why="%d windows for %d calls" % (len(windows), n))
        return res
    per_call_ms = []
    idx = 0
    for i, (lo, hi) in enumerate(windows):
        lo, hi = lo - WINDOW_JITTER_NS, hi + WINDOW_JITTER_NS
        while idx < len(records) and records[idx]["start_ns"] < lo:
            r = records[idx]  # between the last window and this one
            if not (r.get("stream") in gap_streams and r["end_ns"] <= lo + WINDOW_JITTER_NS):
                res["outside_windows"] += 1
            idx += 1
        window = []
        while idx < len(records) and records[idx]["start_ns"] <= hi:
            window.append(records[idx])
            idx += 1
        h, harness = _harness(window, has_spin)
        if h is None:
            res["unchecked_calls"] += 1
            per_call_ms.append(0.0)
            continue
        work = [r for r in window if not any(r is x for x in harness)]
        uncovered = 0.0
        if work:
            first = min(r["start_ns"] for r in work)
            last = max(r["end_ns"] for r in work)
            # beside the harness: before the call could start on the timed stream
            pre = max(0, h - first)
            # longer than the events: the call's work after h cannot fit inside them (an idle
            # gap between h and the start event, a late host, is not work and is not counted)
            post = max(0, (last - max(h, first)) - events_ms[i] * 1e6)
            uncovered = (pre + post) * 1e-6
        per_call_ms.append(uncovered)
        if uncovered > ESCAPE_ABS_MS + ESCAPE_REL * events_ms[i]:
            res["escaped_calls"] += 1
    for r in records[idx:]:  # in the grace period after the last call: only the harness's own
        if not (r.get("stream") in gap_streams and r["end_ns"] <= end_mark + WINDOW_JITTER_NS):
            res["outside_windows"] += 1
    res["max_uncovered_ms"] = max(per_call_ms) if per_call_ms else 0.0
    res["median_uncovered_ms"] = statistics.median(per_call_ms) if per_call_ms else 0.0
    res["tolerated_calls"] = max(1, int(ESCAPE_CALL_SHARE * n))
    res["ok"] = (res["escaped_calls"] <= res["tolerated_calls"] and res["outside_windows"] == 0
                 and res["unchecked_calls"] == 0)
    if per_call:
        res["per_call"] = per_call_ms
    return res
