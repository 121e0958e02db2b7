"""When a candidate's timing looks like a result cache (ECACHE): its fastest repeated call far
faster than its fastest call on fresh copies of the inputs. One rule read by both sides: the
fresh-input probe in the candidate's process (fresh_probe.py), which takes another round of
copies while it holds, and the worker's check of the probe's figures (timed_verdict.py)."""

# tolerated gap between the fastest repeated call and the fastest fresh-input call before a
# cache is suspected: a cache hit is many times faster than a miss, while an honest kernel on
# fresh copies is cold only in TLBs and caches, so a ratio of 2 leaves a wide margin; tiny
# kernels also need an absolute margin
CACHE_RATIO = 0.5
CACHE_MIN_GAP_MS = {"cuda": 0.1, "cpu": 1.0}


def looks_cached(repeat_ms, fresh_ms, mode):
    """Whether repeated calls (repeat_ms) beat calls on fresh copies (fresh_ms) by both margins;
    mode: "cuda" or "cpu"."""
    return repeat_ms < CACHE_RATIO * fresh_ms and fresh_ms - repeat_ms > CACHE_MIN_GAP_MS[mode]
