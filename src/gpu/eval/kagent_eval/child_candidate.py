"""Untrusted child: loads the candidate, runs the verification trials, audits and times it.

Everything it sends may be forged by candidate code running here; the worker compares outputs
against the reference child's and sanity-checks timings with its own clock.
"""
import threading

from . import child_common, child_reference, digest, inputs, loader, timed_inputs, timing
from . import timed_verdict
from .timing import _perf_counter


def prepare(device, threads, warm=True):
    """Everything a candidate's process needs before the candidate: torch on the device, the
    timer (its primitives bound before candidate code runs, its all-stream trace ready) and, on
    a GPU, Triton's driver and the profiler started, so a spare sandbox pays for them before the
    job arrives. Nothing here runs on the GPU (a spare prepares without its GPU's lease); what
    does is kept in state["device_warm"] for warmup.on_device once the job holds the lease."""
    t0 = _perf_counter()
    torch = child_common.setup_torch(device, threads)
    timer = child_common.timer(torch, device)
    state = {"torch": torch, "device": device, "threads": threads, "timer": timer,
             "warmed": {"context_timer": _perf_counter() - t0}}
    if warm and device.startswith("cuda"):
        from . import warmup
        warmed, state["device_warm"] = warmup.host(torch)
        state["warmed"].update(warmed)
    return state


def times_anything(spec):
    """Whether a child for this spec times or profiles anything: it then stops at the gate
    before doing so (the worker holds the device's timing lease from there)."""
    return bool(spec.get("op") == "compare" or spec.get("hardened") or spec.get("audit")
                or spec.get("bench") is not None or spec.get("profile") is not None)


def run(ch, spec, state=None):
    device = spec["device"]
    cuda = device.startswith("cuda")
    ch.stage("load")
    if state is None or state["device"] != device or state["threads"] != spec.get("threads"):
        state = prepare(device, spec.get("threads"), warm=False)
    if spec.get("op") == "compare":
        from . import interleave
        interleave.run(ch, spec, state)
        return
    torch, timer = state["torch"], state["timer"]
    dtype = loader.torch_dtype(torch, spec["dtype"])
    problem = loader.load_module("problem", spec["problem"])
    state["empty_cache_at_gates"] = cuda and bool(spec.get("shared_device"))
    child_common.gate(state, "shared")  # from here on this process runs work on the GPU
    if cuda:  # Triton's compiles give the shared hold up meanwhile
        from . import compile_gate
        compile_gate.install(ch, state, torch.cuda.synchronize)
    ch.stage("build")
    if state.get("device_warm") is not None:
        from . import warmup
        ch.send({"type": "warmed", "parts": warmup.on_device(torch, state.pop("device_warm"))})
    init_inputs = list(problem.get_init_inputs())
    ref_model = loader.build_model(torch, problem.Model, init_inputs, spec["seed"], dtype, device)
    threads_before = threading.active_count()
    module = loader.load_module("candidate", spec["candidate"])
    cand = loader.build_candidate(torch, module, ref_model, init_inputs, spec["seed"], dtype, device)
    ch.send({"type": "loaded", "kind": "ModelNew" if hasattr(module, "ModelNew") else "kernel_function"})

    if spec.get("hardened"):
        # a re-measure of a verified candidate: no trials, only the hardened timing
        child_common.gate(state, "exclusive")
        ch.stage("benchmark")
        _benchmark_hardened(ch, torch, timer, problem, cand, spec, dtype, device)
        return

    plan = [e for e in child_reference.trial_plan(spec, problem)
            if e["trial"] not in set(spec.get("skip_trials") or ())]
    _trials(ch, torch, timer, problem, cand, spec, dtype, device, cuda,
            [e for e in plan if not e["late"]])
    ch.send({"type": "threads", "before": threads_before, "after": threading.active_count()})
    fingerprint = _compiled_fingerprint(module)
    if fingerprint:
        ch.send({"type": "compiled", "fingerprint": fingerprint})

    late = [e for e in plan if e["late"]]
    if not times_anything(spec):
        if late:
            _trials(ch, torch, timer, problem, cand, spec, dtype, device, cuda, late, tolerant=True)
        _gpu_done(ch, torch, cuda)
        return
    # the timed calls' input sets and the warm-up run while the lease is still shared: neither
    # is a figure; the lease exclusive covers only the calls that are timed or profiled
    sets = timed_inputs.Rotation(torch, problem, spec, dtype, device,
                                 timed_inputs.set_trials(plan))
    holder = [None]

    def call():
        with torch.no_grad():
            holder[0] = cand(*sets.current)

    opts = timing.bench_options(spec.get("bench"))
    warm_calls = 0
    if spec.get("bench") is not None:
        ch.stage("warmup")
        warm_calls = timer.warm(call, opts["warmup"], opts["warmup_time"])
    child_common.gate(state, "exclusive")

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
            ch, sets, "benchmark_loop"), after_call=lambda i: sampler.take(holder[0]))
        last_out = holder[0]  # the last timed call's output (the profile's calls come after)
        ch.stage("benchmark_probe")
        probe = _fresh_input_probe(torch, timer, cand, sets.current)

    if spec.get("profile") is not None and cuda:
        ch.stage("profile")
        ch.send({"type": "profile", "result": _profile(torch, call, spec)})
    if cuda:
        torch.cuda.synchronize()
    # the timed work is over: the trace's analysis, the digests, the late trials and this
    # process's exit need the lease only shared
    child_common.gate(state, "shared")
    if loop is not None:
        ch.stage("benchmark_check")
        summary = timer.finish(loop)
        summary["warmup_calls"] += warm_calls
        _send_benchmark(ch, torch, spec, summary, last_out, sets, sampler, probe)
    del sets, holder, loop, last_out
    if late:
        _trials(ch, torch, timer, problem, cand, spec, dtype, device, cuda, late, tolerant=True)
    _gpu_done(ch, torch, cuda)


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


# the stage a candidate's process announces once its GPU work is over: the worker gives back a
# shared hold of the lease (jobs.follow_stage), and the process's exit (the CUDA context torn
# down, no kernel) runs without it
GPU_DONE = "gpu_done"


def _gpu_done(ch, torch, cuda):
    if cuda:
        torch.cuda.synchronize()
        ch.stage(GPU_DONE)


def _trials(ch, torch, timer, problem, cand, spec, dtype, device, cuda, plan, tolerant=False):
    """Runs the given trials and sends what came out. One input set and one output are alive
    at a time, beside the previous output (kept so that a reused buffer shows as overlap).
    tolerant: a trial that raises is reported as that trial's error instead of ending the job."""
    sync = timer._sync
    prev_keep, prev_spans = None, []
    for entry in plan:
        t = entry["trial"]
        ch.stage("compile" if t == 0 else "run")
        try:
            args, dist = inputs.make_inputs(torch, problem, entry["seed"], t, dtype, device,
                                            entry["dist"], entry["sizes"],
                                            spec.get("input_contract"))
            if cuda:
                _poison(torch, device, spec.get("poison_bytes", 0), t)
            in_spans = [child_common.storage_span(torch, a) for a in args
                        if isinstance(a, torch.Tensor)]
            # the inputs and the poison are made on the current stream, asynchronously: the call
            # starts once they are done, so work it puts on another stream never races them
            # (an unjoined side stream is the timing's to catch, not a trial's luck)
            sync()
            t0 = _perf_counter()
            with torch.no_grad():
                out = cand(*args)
            sync()
        except Exception as e:
            if not tolerant:
                raise
            ch.send({"type": "trial", "trial": t, "error": "%s: %s" % (type(e).__name__,
                                                                      str(e)[:500])})
            args = out = None
            continue
        call_ms = (_perf_counter() - t0) * 1e3
        outs = digest.flatten_outputs(torch, out)
        spans = [child_common.storage_span(torch, o) for o in outs if isinstance(o, torch.Tensor)]
        alias_input = any(child_common.overlaps(s, i) for s in spans for i in in_spans)
        alias_prev = any(child_common.overlaps(s, p) for s in spans for p in prev_spans)
        out_metas, out_arrays = digest.digest_list(torch, outs, spec["sample_seed"])
        in_metas, in_arrays = digest.digest_list(torch, args, spec["sample_seed"])
        ch.send({"type": "trial", "trial": t, "dist": dist, "outputs": out_metas,
                 "inputs_after": in_metas, "alias_input": alias_input, "alias_prev": alias_prev,
                 "call_ms": call_ms}, out_arrays + in_arrays)
        del args, out, prev_keep
        prev_keep, prev_spans = outs, spans
    del prev_keep


def _send_benchmark(ch, torch, spec, summary, last_out, sets, sampler, probe=None):
    """The timing, the last call's output in full digest, and every timed call's sample with
    the input set it ran on (the worker checks each against that set's reference)."""
    metas, arrays = digest.digest_list(torch, digest.flatten_outputs(torch, last_out),
                                       spec["sample_seed"])
    if probe is not None:
        summary["fresh_ms"], summary["repeat_ms"] = probe["fresh_ms"], probe["repeat_ms"]
    report, sample_arrays = sampler.report()
    report.update(sets.report())
    ch.send({"type": "benchmark", "time_ms": summary, "last_outputs": metas,
             "timed_outputs": report}, arrays + sample_arrays)


class _AnnouncedFeed:
    """A feed whose untimed work (new inputs before a call, its output's sample after it) is
    announced, so the worker's clock bound (ETAMPER) counts only the timed calls."""

    def __init__(self, ch, feed, sync, sample):
        self.ch, self.feed, self.sync = ch, feed, sync
        self.sample = sample  # samples the last call's output, before the next call's inputs

    def before(self, i, reps):
        def work():
            if i > 0:
                self.sample()
            self.feed.before(i, reps)
        self.untimed(work)

    def untimed(self, work):
        self.ch.stage("benchmark_prep")
        work()
        self.sync()  # the work is queued on the GPU, asynchronously: wait for it here
        self.ch.stage("benchmark_loop")

    def __getattr__(self, name):
        return getattr(self.feed, name)


def _benchmark_hardened(ch, torch, timer, problem, cand, spec, dtype, device):
    """The re-measure of a flagged figure, in a fresh process: fresh inputs (new values, made
    untimed) before every timed call, the persisting-L2 set-aside reset, all streams traced.
    Every call's output is sampled (a call that returns the output of the call before it is
    stale), and the last call runs on the inputs of trial 0, which this process has not seen
    before, its output checked whole by the worker: a cache keyed by address or content cannot
    pass."""
    opts = timing.bench_options(spec.get("bench"))
    reps = int(opts.pop("reps", 0) or 50)
    holder = [None]
    fresh = timed_inputs.Fresh(torch, problem, spec, dtype, device)

    def call():
        with torch.no_grad():
            holder[0] = cand(*fresh.current)

    timer.warm(call, opts["warmup"], opts["warmup_time"])
    ch.stage("benchmark_loop")
    sampler = timed_inputs.Sampler(torch, spec["sample_seed"])
    # each call's sample is taken inside the next call's announced preparation (and the last
    # one after the loop), so neither counts as timed-loop time
    feed = _AnnouncedFeed(ch, fresh, timer._sync, lambda: sampler.take(holder[0]))
    summary = timer.measure(call, **dict(opts, reps=reps, warmup=1, warmup_time=0.0, feed=feed,
                                         hardened=True))
    feed.untimed(feed.sample)
    ch.stage("benchmark_check")
    _send_benchmark(ch, torch, spec, summary, holder[0], fresh, sampler)


def _kernels(torch, call):
    """Per-kernel GPU time of one forward (CUPTI activity on all streams where the profiler
    library is built, else the PyTorch profiler)."""
    try:
        from . import profiling
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
        from . import audit
        return audit.kernels_of(torch, call)


def _poison(torch, device, nbytes, trial):
    """Leave NaN (or a large value) in the allocator's free blocks, so a kernel that reads
    memory it never wrote shows garbage instead of a lucky right answer."""
    if nbytes <= 0:
        return
    n = max(1, min(nbytes, 4 << 30) // 4)
    buf = torch.empty(n, dtype=torch.float32, device=device)
    buf.fill_(float("nan") if trial % 2 == 0 else 1e4)
    del buf


PROBE_CALLS = 5
PROBE_ROUNDS = 3
PROBE_MAX_BYTES = 2 << 30


def _fresh_input_probe(torch, timer, cand, args):
    """Fastest call on the timed inputs and fastest call on fresh inputs: new addresses and new
    values (each floating input's values rotated by a random offset, so the distribution is the
    same and no value sits where it was).

    A result cache keyed by address or by content (or a fast path taken only on repeated inputs)
    makes every repeated call fast and every fresh one slow. Noise (a preempted call on a loaded machine)
    only ever adds time, so the minimum of several calls per side, interleaved so both sides see
    the same machine state, is what stays comparable. All copies are alive at once: freeing one
    would let the allocator hand its address to the next and turn a miss into a hit."""
    nbytes = sum(a.numel() * a.element_size() for a in args if isinstance(a, torch.Tensor))
    n = max(2, min(PROBE_CALLS, PROBE_MAX_BYTES // max(1, nbytes)))
    mode = "cuda" if timer.cuda else "cpu"
    fresh, repeat, alive = [], [], []
    # A cache makes every round look the same; noise does not. So while the minima still look
    # like a cache, take another round with new copies (up to PROBE_ROUNDS, within the memory
    # budget) and pool the samples. Every copy stays alive, so no address is ever reused.
    for k in range(PROBE_ROUNDS):
        if k > 0 and (len(alive) + n) * nbytes > 2 * PROBE_MAX_BYTES:
            break
        copies = [[_fresh_values(torch, a, len(alive) + i + 1) for a in args] for i in range(n)]
        alive.extend(copies)
        with torch.no_grad():
            for c in copies:  # the larger of event and host time: work on a side stream counts too
                repeat.append(max(timer.time_once(lambda: cand(*args))))
                fresh.append(max(timer.time_once(lambda: cand(*c))))
        f, r = min(fresh), min(repeat)
        if not (r < timed_verdict.CACHE_RATIO * f and f - r > timed_verdict.CACHE_MIN_GAP_MS[mode]):
            break
    return {"fresh_ms": min(fresh), "repeat_ms": min(repeat), "n": len(fresh)}


def _fresh_values(torch, value, k):
    """A copy of an input at an address the candidate has never seen; a floating one with its
    values rotated by an offset that differs per copy (integer inputs, such as indices, are
    copied as they are)."""
    if not isinstance(value, torch.Tensor):
        return value
    if not value.is_floating_point() or value.numel() < 2:
        return _at_unseen_address(torch, value)
    flat = value.reshape(-1)
    rolled = torch.roll(flat, shifts=1 + (k * 7919) % (flat.numel() - 1)).view(value.shape)
    return _at_unseen_address(torch, rolled)


# The allocator hands freed blocks back, so a plain copy can land where an earlier trial's input
# was, an address a cache keyed by address still holds. Blocks start aligned (64 bytes on the
# CPU; 512 in PyTorch's CUDA allocator, within allocations aligned to at least 256); a view this
# far into a buffer of its own starts where no block does, yet stays aligned for vector loads (a
# GPU cache line).
UNSEEN_OFFSET_BYTES = {"cpu": 32, "cuda": 128}


def _at_unseen_address(torch, value):
    offset = UNSEEN_OFFSET_BYTES["cuda" if value.is_cuda else "cpu"]
    pad = max(1, offset // value.element_size())
    buf = torch.empty(value.numel() + pad, dtype=value.dtype, device=value.device)
    out = buf[pad:].view(value.shape)
    out.copy_(value)
    return out


def _compiled_fingerprint(module):
    """Hash of the PTX of the Triton kernels the candidate compiled, where Triton exposes it."""
    import hashlib
    h, found = hashlib.sha256(), 0
    for value in list(vars(module).values()):
        caches = getattr(value, "device_caches", None) or {}
        if not caches and isinstance(getattr(value, "cache", None), dict):
            caches = value.cache
        try:
            for dev_cache in caches.values():
                table = dev_cache[0] if isinstance(dev_cache, tuple) else dev_cache
                for kernel in list(getattr(table, "values", lambda: [])()):
                    asm = getattr(kernel, "asm", {}) or {}
                    code = asm.get("ptx") or asm.get("ttgir")
                    if code:
                        h.update(code.encode() if isinstance(code, str) else bytes(code))
                        found += 1
        except Exception:
            continue
    return h.hexdigest()[:16] if found else None


def _profile(torch, call, spec):
    try:
        from . import profiling
    except Exception as e:
        return {"ok": False, "error": "ENOTSUP: profiler module unavailable (%s)" % e}
    try:  # the job's metric set, its default filled in (job_defaults.py)
        res = profiling.profile(call, metrics=spec["profile"]["metric_set"], device_index=0)
        res.pop("kernels", None)  # per-launch rows are large; per-name metrics stay
        return dict(res, ok=True)
    except Exception as e:
        return {"ok": False, "error": "EPROFILE: %s: %s" % (type(e).__name__, str(e)[:500])}
