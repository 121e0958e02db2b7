"""The timed phases of a candidate's process (child_candidate.py): the benchmark with its audit,
probe and profile, and the hardened re-measure. What it sends may be forged by the candidate; the
worker checks it (timed_verdict.py)."""
from . import child_common, fresh_probe
from ..common import digest, timed_inputs, timing

# announced once a timed loop's calls have all finished: the activity trace is read after it, so
# the worker's clock bound on "benchmark_loop" (timed_verdict.loop_ms) counts the calls only
TRACE_STAGE = "benchmark_trace"


def timed(job, plan):
    """The timed phase of a verified candidate: the warm-up (and a profile's preparation, and the
    fresh-input probe's first copies) while the lease is shared, then under it exclusive the
    audit's traced call, the benchmark's loop and fresh-input probe, and the profile; the loop's
    checks once the lease is shared again."""
    ch, torch, timer, spec, cuda = job.ch, job.torch, job.timer, job.spec, job.cuda
    # the timed calls' input sets and the warm-up run while the lease is still shared: neither
    # is a figure; the lease exclusive covers only the calls that are timed or profiled
    sets = timed_inputs.Rotation(torch, job.problem, spec, job.dtype, job.device,
                                 timed_inputs.set_trials(plan))
    holder = [None]

    def call():
        with torch.no_grad():
            holder[0] = job.cand(*sets.current)

    opts = timing.bench_options(spec.get("bench"))
    warm_calls = 0
    if spec.get("bench") is not None:
        ch.stage("warmup")
    if spec.get("profile") is not None and cuda:
        # before the warm-up, which leaves the GPU's clocks as the timed calls need them
        prepare_profile(spec["profile"]["metric_set"])
    ahead = None
    if spec.get("bench") is not None:
        ahead = fresh_probe.prepare(torch, sets.current, job.device)
        warm_calls = timer.warm(call, opts["warmup"], opts["warmup_time"])
    child_common.gate(job.state, "exclusive")

    if spec.get("audit") and cuda:
        # the trials have warmed the candidate up already, so one traced call is enough
        # (the profiler itself was started by the spare sandbox, before the job)
        ch.stage("audit")
        ch.send({"type": "kernels", "kernels": _kernels(torch, call)})

    loop = probe = last_out = None
    if spec.get("bench") is not None:
        # one call (its clocks back after the gate's wait), the launch pad, then the loop
        ch.stage("benchmark")
        sampler = timed_inputs.Sampler(torch, spec["sample_seed"])
        # the worker's clock bounds the loop stage against the reported times (ETAMPER)
        loop = timer.timed_loop(call, **dict(opts, warmup=1, warmup_time=0.0), feed=_Staged(
            ch, sets, "benchmark_loop"), after_call=lambda i: sampler.take(holder[0]),
            calls_done=lambda: ch.stage(TRACE_STAGE))
        last_out = holder[0]  # the last timed call's output (the profile's calls come after)
        ch.stage("benchmark_probe")
        probe = fresh_probe.probe(torch, timer, job.cand, sets.current, ahead)
        ahead = None  # the copies' memory goes back before the profile

    if spec.get("profile") is not None and cuda:
        ch.stage("profile")
        ch.send({"type": "profile", "result": _profile(call, spec)})
    if cuda:
        torch.cuda.synchronize()
    # the timed work is over: the trace's analysis, the digests, the late trials and this
    # process's exit need the lease only shared
    child_common.gate(job.state, "shared")
    if loop is not None:
        ch.stage("benchmark_check")
        summary = timer.finish(loop)
        summary["warmup_calls"] += warm_calls
        _send_benchmark(job, summary, last_out, sets, sampler, probe)


class _Staged:
    """A feed that announces `stage` before the first timed call (after the loop's own one-call
    warm-up, pad fit and first timing), so the stage covers the timed calls only."""

    def __init__(self, ch, feed, stage):
        self.ch, self.feed, self.stage = ch, feed, stage

    def before(self, i, plan):
        if i == 0:
            self.ch.stage(self.stage)
        self.feed.before(i, plan)

    def __getattr__(self, name):
        return getattr(self.feed, name)


def _send_benchmark(job, summary, last_out, sets, sampler, probe=None):
    """The timing, the last call's output in full digest, and every timed call's sample with
    the input set it ran on (the worker checks each against that set's reference)."""
    torch = job.torch
    metas, arrays = digest.digest_list(torch, digest.flatten_outputs(torch, last_out),
                                       job.spec["sample_seed"])
    if probe is not None:
        summary["fresh_ms"], summary["repeat_ms"] = probe["fresh_ms"], probe["repeat_ms"]
    report, sample_arrays = sampler.report()
    report.update(sets.report())
    job.ch.send({"type": "benchmark", "time_ms": summary, "last_outputs": metas,
                 "timed_outputs": report}, arrays + sample_arrays)


class _AnnouncedFeed:
    """A feed whose untimed work (new inputs before a call, its output's sample after it, and
    the timer's own work between calls: the persisting-L2 reset) is announced, so the worker's
    clock bound (ETAMPER) counts only the timed calls. The timer hands that work to untimed()."""

    def __init__(self, ch, feed, sync, sample):
        self.ch, self.feed, self.sync = ch, feed, sync
        self.sample = sample  # samples the last call's output, before the next call's inputs

    def before(self, i, reps):
        if i > 0:
            self.sample()
        self.feed.before(i, reps)

    def untimed(self, work):
        self.ch.stage("benchmark_prep")
        work()
        self.sync()  # the work is queued on the GPU, asynchronously: wait for it here
        self.ch.stage("benchmark_loop")

    def __getattr__(self, name):
        return getattr(self.feed, name)


def hardened(job):
    """The re-measure of a flagged figure, in a fresh process: fresh inputs (new values, made
    untimed) before every timed call, the persisting-L2 set-aside reset, all streams traced.
    Every call's output is sampled (a call that returns the output of the call before it is
    stale), and the last call runs on the inputs of trial 0, which this process has not seen
    before, its output checked whole by the worker: a cache keyed by address or content cannot
    pass."""
    ch, torch, timer, spec = job.ch, job.torch, job.timer, job.spec
    opts = timing.bench_options(spec.get("bench"))
    reps = int(opts.pop("reps", 0) or 50)
    holder = [None]
    fresh = timed_inputs.Fresh(torch, job.problem, spec, job.dtype, job.device)

    def call():
        with torch.no_grad():
            holder[0] = job.cand(*fresh.current)

    timer.warm(call, opts["warmup"], opts["warmup_time"])
    ch.stage("benchmark_loop")
    sampler = timed_inputs.Sampler(torch, spec["sample_seed"])
    # each call's sample is taken inside the next call's announced preparation (and the last
    # one after the loop), so neither counts as timed-loop time
    feed = _AnnouncedFeed(ch, fresh, timer._sync, lambda: sampler.take(holder[0]))
    summary = timer.measure(call, **dict(opts, reps=reps, warmup=1, warmup_time=0.0, feed=feed,
                                         hardened=True), calls_done=lambda: ch.stage(TRACE_STAGE))
    feed.untimed(feed.sample)
    ch.stage("benchmark_check")
    _send_benchmark(job, summary, holder[0], fresh, sampler)


def _kernels(torch, call):
    """Per-kernel GPU time of one forward (CUPTI activity on all streams where the profiler
    library is built, else the PyTorch profiler)."""
    try:
        from ..profile import profiling
        rows = profiling.trace_kernels(call, 0)
        table = {}
        for r in rows:
            rec = table.setdefault(r["name"], {"name": r["name"], "time_ms": 0.0, "calls": 0})
            rec["time_ms"] += float(r.get("duration_ms") or 0.0)
            rec["calls"] += 1
            for key in ("grid", "block", "registers", "shared_mem"):
                if r.get(key) is not None and key not in rec:
                    rec[key] = r[key]
        return sorted(table.values(), key=lambda r: -r["time_ms"])
    except Exception:
        return _torch_profiler_kernels(torch, call)


def _torch_profiler_kernels(torch, fn, calls=3):
    """Run fn under the PyTorch profiler; per-kernel GPU time summed over the calls, per call
    (the data audit.classify reads in the worker)."""
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    table = {}
    for evt in prof.events():
        dev_type = getattr(evt, "device_type", None)
        if dev_type is None or "CUDA" not in str(dev_type):
            continue
        t_us = getattr(evt, "device_time", None)
        if t_us is None:
            t_us = getattr(evt, "cuda_time", 0.0)
        rec = table.setdefault(evt.name, {"name": evt.name, "time_ms": 0.0, "calls": 0})
        rec["time_ms"] += float(t_us) / 1e3 / calls
        rec["calls"] += 1
    kernels = sorted(table.values(), key=lambda r: -r["time_ms"])
    for k in kernels:
        k["calls"] = k["calls"] / calls
    return kernels


def prepare_profile(metric_set):
    """The profile's metric check and config image for the job's set, made while the lease is
    still shared (a spare makes them only where the job before it profiled, jobs.py): the
    exclusive lease then holds the replay passes only. Where they cannot be made now (another
    process profiling the GPU), the profile stage makes them itself."""
    try:
        from ..profile import profiling
        profiling.prepare_set(metric_set, 0)
    except Exception:
        pass


def _profile(call, spec):
    try:
        from ..profile import profiling
    except Exception as e:
        return {"ok": False, "error": "ENOTSUP: profiler module unavailable (%s)" % e}
    try:  # the job's metric set, its default filled in (job_defaults.py)
        res = profiling.profile(call, metrics=spec["profile"]["metric_set"], device_index=0)
        res.pop("kernels", None)  # per-launch rows are large; per-name metrics stay
        return dict(res, ok=True)
    except Exception as e:
        return {"ok": False, "error": "EPROFILE: %s: %s" % (type(e).__name__, str(e)[:500])}
