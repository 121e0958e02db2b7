"""One timing method for the reference (eager, torch.compile) and the candidate.

Warm-up (a number of calls and a minimum duration, so clocks settle), then per timed call: a
device-wide sync, flush L2 (write a 256 MB buffer), a short GPU spin that covers the call's host
launch time, CUDA events around the call, a device-wide sync after it, and a sync-bounded host
clock as well. The figure is the events' time; it is only trusted once the all-stream check
agrees that no device work of the call lay outside the events (``stream_check.py``).
Timing primitives are bound at import, before any candidate code runs in the process, so a
candidate that patches them later does not reach this module.
How many calls: until the median's confidence interval is narrow enough, or a time budget, never
below a floor (stop_rule.StopRule; the options and their defaults: BENCH_DEFAULTS).
"""
import functools
import math
import statistics
import time

from . import cuda_driver, stream_check
from .stop_rule import StopRule
from .stream_check import L2_FLUSH_BYTES  # the all-stream check recognizes the flush by its size

_perf_counter = time.perf_counter
_sleep = time.sleep
MAX_PAD_MS = 1.0  # longest spin put before a timed call to hide its launch
# TEST ONLY: a FAKE noisy clock (noise.FAKE_CLOCK_ENV): every third timed call reads this many
# times too long, in whatever process the worker turned it on for (fake_noisy_clock)
FAKE_NOISE_FACTOR = 25.0
_fake_noisy = False


def fake_noisy_clock(on):
    """Turns the FAKE noisy clock of this process's timed loops on or off (a child does, from
    its spec's `fake_noisy_clock`, which only the worker sets: noise.fake_noisy_window)."""
    global _fake_noisy
    _fake_noisy = bool(on)

# A job's timing options and their defaults: the one place (docs/lua-api.md, job field `bench`;
# the children and the worker read them through bench_options).
BENCH_DEFAULTS = {
    # warm-up: at least this many calls and, on a GPU, seconds of them; 0.025 s gives the same
    # medians as 0.1 s within 1%, with or without a wait after it (bench/warmup_time.py,
    # docs/results/2026-11-28-gpu-g.md)
    "warmup": 3, "warmup_time": 0.025,
    # how many timed calls: "ci" until the median is known to within +-ci of itself (StopRule),
    # or budget seconds of calls; "time" about min_time seconds of calls (the earlier fixed loop)
    "stop": "ci", "ci": 0.005, "budget": 1.0, "min_time": 1.0,
    "min_reps": 10, "max_reps": 1000,  # floor and cap on the number of timed calls
    "reps": None,  # a fixed number of calls instead (the hardened re-measure)
}


def bench_options(bench):
    """BENCH_DEFAULTS with a job's `bench` table over them (None keeps the default; keys that
    are not timing options, such as baselines, are left out)."""
    bench = bench or {}
    return {k: (bench[k] if bench.get(k) is not None else v) for k, v in BENCH_DEFAULTS.items()}


class Timer:
    def __init__(self, torch, device, tracer=None, untraced=None, calibrate=True):
        """tracer: an object with begin(), mark() and end() (``profiler_lib.ActivityTrace``) that
        sees all device work; without one on a GPU the figures carry no all-stream check, and
        untraced says why (child_common.timer). calibrate=False: no kernel runs here; the L2
        flush and the launch pad's spin rate are measured by calibrate(), or when first read."""
        self.torch = torch
        self.cuda = device.startswith("cuda")
        self.tracer = tracer if self.cuda else None
        self.untraced = untraced or "libkagent_prof"
        if self.cuda:
            self._sync = torch.cuda.synchronize
            self._event = torch.cuda.Event
            self._flush_buf = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device=device)
            self._spin = getattr(torch.cuda, "_sleep", None)
            self._reset_persisting_l2 = cuda_driver.persisting_l2_reset()
            # the untimed work between timed calls runs here (inputs, output samples): the
            # all-stream trace tells it from the candidate's by this stream
            self.prep_stream = cuda_driver.own_stream(torch, device)
            self._flush_ms = self._cycles_per_ms = None
        else:
            self._sync = lambda: None
            self._spin = None
            self._reset_persisting_l2 = None
            self.prep_stream = None
            self._flush_ms, self._cycles_per_ms = 0.0, None
        self._calibrated = not self.cuda
        if calibrate:
            self.calibrate()
        self.pad_cycles, self.pad_ms = 0, 0.0

    def calibrate(self):
        """Measures the L2 flush's time and the launch pad's spin rate (kernels: a few ms of GPU
        work), once. A spare builds its timer without them, since it holds no lease; its job
        calls this once it holds the lease shared (child_candidate._load)."""
        if not self._calibrated:
            self._flush_ms = self._flush_time()
            self._cycles_per_ms = self._spin_rate()
            self._calibrated = True

    @property
    def flush_ms(self):
        self.calibrate()
        return self._flush_ms

    @property
    def cycles_per_ms(self):
        """GPU spin cycles per ms (for the launch pad), or None where torch cannot spin."""
        self.calibrate()
        return self._cycles_per_ms

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

    def time_once(self, fn, mark=None):
        """(event_ms, wall_ms) of one call with a cold L2.

        No sync between the flush and the call: the CPU launches the call while the GPU is still
        flushing, so Python launch overhead is hidden as in triton's do_bench. The host clock
        covers flush + call up to a device-wide sync; the flush's own time is taken off.
        mark(), if given, runs while the device is idle, just before the flush and after the
        closing sync: it opens and closes the call's window in the all-stream trace."""
        if self.cuda:
            self._sync()
            if mark is not None:
                mark()
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
            if mark is not None:
                mark()
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

    def measure(self, fn, feed=None, after_call=None, hardened=False, calls_done=None, **opts):
        """Timing summary in ms (``timed_loop`` then ``finish``: one process that can give the
        GPU up between them calls the two itself, child_candidate.py)."""
        return self.finish(self.timed_loop(fn, feed=feed, after_call=after_call,
                                           hardened=hardened, calls_done=calls_done, **opts))

    def timed_loop(self, fn, feed=None, after_call=None, hardened=False, calls_done=None, **opts):
        """The timed calls; what ``finish`` summarizes. opts: those of BENCH_DEFAULTS (the
        number of calls: ``reps`` when given, else by ``stop``: "ci" until StopRule says the
        median is known well enough, "time" about min_time seconds of calls).

        feed.before(i, plan), if given, runs untimed before timed call i (which input set it
        runs on, timed_inputs.py; plan: the calls it may count on, so a rotation's moves fall
        inside the loop); after_call(i) runs untimed after it (a sample of its output), in the
        same untimed stretch as the next call's feed, on a stream of their own. hardened: the
        persisting-L2 set-aside is reset in that stretch too, so no data a candidate pinned in
        L2 survives the flush. A feed with ``untimed(work)`` is handed the whole stretch to
        announce (the worker's clock bound, candidate_timing.py). calls_done(), if given, runs
        once every call's work (on all streams) has finished, before the activity trace is
        read: a stage announced there makes that bound count the calls, not the trace."""
        o = bench_options(opts)
        done = self.warm(fn, o["warmup"], o["warmup_time"])
        self.fit_pad(fn)
        first_event, _ = self.time_once(fn)
        rule = StopRule.for_options(o, first_event)
        tracer = self.tracer
        marks = []
        mark = (lambda: marks.append(tracer.mark())) if tracer is not None else None
        prep_stream, gap_streams = None, ()
        if (feed is not None or after_call is not None) and self.cuda:
            # inputs and output samples are made on the timer's own stream, so the trace can
            # tell that work between calls from work a candidate's thread left there
            prep_stream = self.prep_stream
            if tracer is not None:
                gap_streams = (tracer.stream_id(prep_stream.cuda_stream),)
        reset = self._reset_persisting_l2 if hardened else None
        announce = getattr(feed, "untimed", None)
        events, walls = [], []
        records = end_mark = None
        if tracer is not None:
            tracer.begin()
        t_begin = _perf_counter()
        try:
            i = 0
            while True:
                if feed is not None or reset is not None or (after_call is not None and i > 0):
                    work = functools.partial(_between, i, rule.plan, feed, after_call, reset)
                    self._untimed((lambda: announce(work)) if announce else work, prep_stream)
                e, w = self.time_once(fn, mark)
                if _fake_noisy and i % 3 == 0:
                    e, w = e * FAKE_NOISE_FACTOR, w * FAKE_NOISE_FACTOR
                events.append(e)
                walls.append(w)
                i += 1
                if rule.add(e, _perf_counter() - t_begin):
                    break
            if after_call is not None:
                self._untimed(lambda: after_call(i - 1), prep_stream)
            elapsed_ms = (_perf_counter() - t_begin) * 1e3
            if tracer is not None:
                # work a thread launches after the last call still lands in the trace
                _sleep(min(0.05, max(0.002, 4e-3 * statistics.median(events))))
                self._sync()
                end_mark = tracer.mark()
            if calls_done is not None:
                calls_done()
        finally:
            if tracer is not None:
                records = tracer.end()
        return {"events": events, "walls": walls, "elapsed_ms": elapsed_ms, "warmup_calls": done,
                "hardened": bool(hardened), "stop": rule.report(), "marks": marks,
                "end_mark": end_mark, "records": records, "gap_streams": gap_streams}

    def finish(self, loop):
        """The summary of a ``timed_loop``, with its all-stream check: CPU work only (the trace
        was taken during the loop), so it may run after the GPU's lease is given back."""
        events = loop["events"]
        out = summarize(events, loop["walls"], loop["elapsed_ms"])
        out["warmup_calls"], out["pad_ms"] = loop["warmup_calls"], round(self.pad_ms, 4)
        out["hardened"] = loop["hardened"]
        out["stop"] = loop["stop"]
        if self.tracer is not None:
            marks = loop["marks"]
            windows = list(zip(marks[0::2], marks[1::2]))
            out["all_streams"] = stream_check.all_stream_check(
                loop["records"], windows, loop["end_mark"], events, has_spin=self.pad_cycles > 0,
                gap_streams=loop["gap_streams"])
        elif self.cuda:
            out["all_streams"] = {"checked": False, "ok": False,
                                  "why": "no activity trace in this process (%s)" % self.untraced}
        return out

    def _untimed(self, work, stream):
        if stream is None:
            work()
            return
        with self.torch.cuda.stream(stream):
            work()
        stream.synchronize()


def _between(i, plan, feed, after_call, reset=None):
    """The untimed work before timed call i: the last output's sample, i's inputs, the L2 reset."""
    if after_call is not None and i > 0:
        after_call(i - 1)
    if feed is not None:
        feed.before(i, plan)
    if reset is not None:
        reset()


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
    out["cv"] = (statistics.pstdev(ev) / out["mean"]) if out["mean"] > 0 and len(ev) > 1 else 0.0
    # host-observed time far above the events: work escaped the timed stream (a coarse check
    # that needs no trace; the all-stream check is the fine one)
    if out["wall_median"] > 1.5 * out["median"] + 0.05:
        out["untimed_work"] = True
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
