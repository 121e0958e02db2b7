"""One timing method for the reference (eager, torch.compile) and the candidate.

Warm-up (a number of calls and a minimum duration, so clocks settle), then per timed call: flush
L2 (write a 256 MB buffer), a short GPU spin that covers the call's host launch time, CUDA events
around the call, a device-wide sync after it, and a sync-bounded host clock as well; the host
clock catches work that escapes the events (side streams, threads). Timing primitives are bound
at import, before any candidate code runs in the process, so a candidate that patches them later
does not reach this module.
"""
import math
import statistics
import time

_perf_counter = time.perf_counter
L2_FLUSH_BYTES = 256 << 20
MAX_PAD_MS = 1.0  # longest spin put before a timed call to hide its launch


class Timer:
    def __init__(self, torch, device):
        self.torch = torch
        self.cuda = device.startswith("cuda")
        if self.cuda:
            self._sync = torch.cuda.synchronize
            self._event = torch.cuda.Event
            self._flush_buf = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device=device)
            self._spin = getattr(torch.cuda, "_sleep", None)
            self.flush_ms = self._flush_time()
            self.cycles_per_ms = self._spin_rate()
        else:
            self.flush_ms = 0.0
            self._sync = lambda: None
            self._spin = None
            self.cycles_per_ms = None
        self.pad_cycles, self.pad_ms = 0, 0.0

    def flush(self):
        if self.cuda:
            self._flush_buf.zero_()

    def _flush_time(self):
        times = []
        for _ in range(5):
            start, end = self._event(enable_timing=True), self._event(enable_timing=True)
            start.record()
            self.flush()
            end.record()
            self._sync()
            times.append(start.elapsed_time(end))
        return sorted(times)[2]

    def _spin_rate(self):
        """GPU spin cycles per ms (for the launch pad), or None where torch cannot spin."""
        if self._spin is None:
            return None
        try:
            rates = []
            for _ in range(3):
                start, end = self._event(enable_timing=True), self._event(enable_timing=True)
                self._spin(100000)  # keeps the GPU busy while the measured spin is launched
                start.record()
                self._spin(1000000)
                end.record()
                self._sync()
                rates.append(1000000 / max(start.elapsed_time(end), 1e-6))
            return sorted(rates)[1]
        except Exception:
            self._spin = None
            return None

    def fit_pad(self, fn):
        """Spin long enough after the flush that the GPU is still busy when the CPU has finished
        launching fn: otherwise an idle gap (Python, guards, launch) lands inside the events,
        which a do_bench-style loop (that never waits between calls) does not see."""
        if not self.cuda or not self.cycles_per_ms:
            return
        self._sync()
        t0 = _perf_counter()
        fn()
        launch_ms = (_perf_counter() - t0) * 1e3
        self._sync()
        want = min(MAX_PAD_MS, max(0.0, 2.0 * launch_ms + 0.02 - self.flush_ms))
        self.pad_cycles = int(want * self.cycles_per_ms)
        self.pad_ms = want if self.pad_cycles > 0 else 0.0

    def time_once(self, fn):
        """(event_ms, wall_ms) of one call with a cold L2.

        No sync between the flush and the call: the CPU launches the call while the GPU is still
        flushing, so Python launch overhead is hidden as in triton's do_bench. The host clock
        covers flush + call up to a device-wide sync; the flush's own time is taken off."""
        if self.cuda:
            self._sync()
            start, end = self._event(enable_timing=True), self._event(enable_timing=True)
            self.flush()
            t0 = _perf_counter()
            if self.pad_cycles:
                self._spin(self.pad_cycles)
            start.record()
            fn()
            end.record()
            self._sync()
            t1 = _perf_counter()
            return start.elapsed_time(end), max(0.0, (t1 - t0) * 1e3 - self.flush_ms - self.pad_ms)
        t0 = _perf_counter()
        fn()
        t1 = _perf_counter()
        return (t1 - t0) * 1e3, (t1 - t0) * 1e3

    def warm(self, fn, calls=3, seconds=0.1):
        """At least `calls` calls and, on a GPU, at least `seconds` of them, so clocks and
        caches reach the state the timed loop runs in. Returns the number of calls."""
        t_end = _perf_counter() + (seconds if self.cuda else 0.0)
        done = 0
        while done < max(1, calls) or _perf_counter() < t_end:
            fn()
            done += 1
            if done % 8 == 0:
                self._sync()  # bounded queue: the duration is GPU time, not launches ahead
        self._sync()
        return done

    def measure(self, fn, warmup=3, reps=None, min_reps=10, max_reps=1000, min_time=1.0,
                warmup_time=0.1):
        """Timing summary in ms; reps chosen so the timed calls take about min_time."""
        done = self.warm(fn, warmup, warmup_time)
        self.fit_pad(fn)
        first_event, _ = self.time_once(fn)
        if reps is None:
            est = max(first_event, 1e-3)
            reps = int(min(max_reps, max(min_reps, math.ceil(min_time * 1e3 / est))))
        events, walls = [], []
        t_begin = _perf_counter()
        for _ in range(reps):
            e, w = self.time_once(fn)
            events.append(e)
            walls.append(w)
        elapsed_ms = (_perf_counter() - t_begin) * 1e3
        out = summarize(events, walls, elapsed_ms)
        out["warmup_calls"], out["pad_ms"] = done, round(self.pad_ms, 4)
        return out


def percentile(sorted_vals, q):
    if not sorted_vals:
        return None
    k = (len(sorted_vals) - 1) * q
    lo, hi = int(math.floor(k)), int(math.ceil(k))
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (k - lo)


def summarize(events, walls, elapsed_ms):
    ev = sorted(events)
    wl = sorted(walls)
    out = {
        "median": statistics.median(ev), "p10": percentile(ev, 0.1), "p90": percentile(ev, 0.9),
        "mean": sum(ev) / len(ev), "min": ev[0], "n": len(ev),
        "wall_median": statistics.median(wl), "elapsed_ms": elapsed_ms,
    }
    out["spread"] = out["p90"] / out["p10"] if out["p10"] and out["p10"] > 0 else None
    # host-observed time far above the events: work escaped the timed stream
    if out["wall_median"] > 1.5 * out["median"] + 0.05:
        out["untimed_work"] = True
        out["event_median"] = out["median"]
        out["median"] = out["wall_median"]
        out["p10"], out["p90"] = percentile(wl, 0.1), percentile(wl, 0.9)
        out["mean"] = sum(wl) / len(wl)
    return out


def do_bench_mean(fn, warmup_ms=25, rep_ms=100):
    """triton.testing.do_bench mean (L2 flushed by do_bench itself), or None without Triton."""
    try:
        from triton.testing import do_bench
    except Exception:
        return None
    try:
        return float(do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="mean"))
    except TypeError:
        return float(do_bench(fn, warmup=warmup_ms, rep=rep_ms))
