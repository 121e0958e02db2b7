"""Interleaved timing of several verified candidates in one process (the `compare` op, child
side): the same inputs, the same timer, the same launch pad, in blocks ordered A B ... then
... B A, so drift in clocks or temperature falls on every candidate alike. Each block's median
gives one ratio against the first candidate; the worker summarises them.

The whole session runs under one all-stream trace and each candidate's calls are checked as in
a benchmark (``stream_check.all_stream_check``); the calls rotate through the benchmark's input
sets and every call's output is sampled for the worker to check (``timed_inputs``)."""
from . import child_common, child_reference
from ..common import digest, loader, stream_check, timed_inputs, timing
from ..common.timing import _perf_counter

# each candidate's warm-up before the first block (job field warmup_time overrides it): the
# blocks start right after it, and 0.025 s (a candidate's own default, timing.BENCH_DEFAULTS) once
# left the first block cold and the ranking's p10 below 1 (docs/results/2026-11-28-gpu-g.md)
WARMUP_S = 0.1


def run(ch, spec, state):
    torch, timer = state["torch"], state["timer"]
    device = spec["device"]
    dtype = loader.torch_dtype(torch, spec["dtype"])
    problem = loader.load_module("problem", spec["problem"])
    child_common.gate(state, "shared")
    timer.calibrate()  # before any candidate's code is imported (a spare's timer waits for it)
    init_inputs = list(problem.get_init_inputs())
    ref_model = loader.build_model(torch, problem.Model, init_inputs, spec["seed"], dtype, device)
    cands = []
    for k, source in enumerate(spec["candidates"]):
        module = loader.load_module("candidate%d" % k, source)
        cands.append(loader.build_candidate(torch, module, ref_model, init_inputs, spec["seed"],
                                            dtype, device))
    ch.send({"type": "loaded", "count": len(cands)})
    sets = timed_inputs.Rotation(torch, problem, spec, dtype, device,
                                 timed_inputs.set_trials(child_reference.trial_plan(spec, problem)))
    holders = [[None] for _ in cands]
    calls = [_caller(torch, c, sets, h) for c, h in zip(cands, holders)]
    samplers = [timed_inputs.Sampler(torch, spec["sample_seed"]) for _ in cands]

    ch.stage("compile")
    for call in calls:
        timer.warm(call, 3, 0.0)
    child_common.gate(state, "exclusive")
    ch.stage("benchmark")
    pad = 0
    for call in calls:  # one launch pad for all: the longest any candidate needs
        timer.warm(call, 3, float(spec.get("warmup_time", WARMUP_S)))
        timer.fit_pad(call)
        pad = max(pad, timer.pad_cycles)
    timer.pad_cycles = pad
    timer.pad_ms = pad / timer.cycles_per_ms if timer.cycles_per_ms else 0.0

    ch.stage("benchmark_loop")
    per_block = int(spec.get("calls_per_block", 5))
    blocks = int(spec.get("rounds", 8))
    events = [[] for _ in cands]
    block_medians = [[] for _ in cands]
    owner, all_events, marks = [], [], []
    tracer = timer.tracer
    mark = (lambda: marks.append(tracer.mark())) if tracer is not None else None
    # the sets' moves and the output samples run on the timer's own stream, between the calls
    prep = timer.prep_stream
    gap_streams = (tracer.stream_id(prep.cuda_stream),) if tracer is not None else ()
    total = blocks * per_block * len(cands)
    if tracer is not None:
        tracer.begin()
    t0 = _perf_counter()
    try:
        for b in range(blocks):
            order = range(len(cands)) if b % 2 == 0 else reversed(range(len(cands)))
            for k in order:
                times = []
                for _ in range(per_block):
                    # one untimed stretch between calls: the last call's sample, this one's set
                    timer._untimed(lambda: _between(owner, sets, samplers, holders, total), prep)
                    e, _ = timer.time_once(calls[k], mark)
                    times.append(e)
                    owner.append(k)
                    all_events.append(e)
                events[k].extend(times)
                block_medians[k].append(sorted(times)[len(times) // 2])
        timer._untimed(lambda: samplers[owner[-1]].take(holders[owner[-1]][0]), prep)
        elapsed_ms = (_perf_counter() - t0) * 1e3
        end_mark = None
        if tracer is not None:
            timer._sync()
            end_mark = tracer.mark()
    finally:
        records = tracer.end() if tracer is not None else None
    checks = _stream_checks(records, marks, end_mark, all_events, owner, len(cands),
                            timer.pad_cycles > 0, gap_streams) if tracer is not None else None

    ch.stage("benchmark_check")
    for k, holder in enumerate(holders):
        outs = digest.flatten_outputs(torch, holder[0])
        metas, arrays = digest.digest_list(torch, outs, spec["sample_seed"])
        summary = timing.summarize(events[k], events[k], elapsed_ms)
        if checks is not None:
            summary["all_streams"] = checks[k]
        elif device.startswith("cuda"):
            summary["all_streams"] = {"checked": False, "ok": False,
                                      "why": "no activity trace in this process (libkagent_prof)"}
        report, sample_arrays = samplers[k].report()
        report.update(kind="rotation", sets=sets.trials,
                      calls=[c for c, o in zip(sets.calls, owner) if o == k])
        ch.send({"type": "timed", "index": k, "time_ms": summary, "blocks": block_medians[k],
                 "last_outputs": metas, "timed_outputs": report}, arrays + sample_arrays)


def _between(owner, sets, samplers, holders, total):
    """Before call len(owner): the previous call's output sampled (by its candidate's sampler),
    then the input set this call runs on."""
    if owner:
        samplers[owner[-1]].take(holders[owner[-1]][0])
    sets.before(len(owner), total)


def _caller(torch, cand, sets, holder):
    def call():
        with torch.no_grad():
            holder[0] = cand(*sets.current)
    return call


def _stream_checks(records, marks, end_mark, events, owner, n, has_spin, gap_streams):
    """The all-stream check per candidate: the whole session's windows are checked together
    (work between any two calls is outside, but for the harness's own stream), then each call's
    verdict goes to its candidate."""
    windows = list(zip(marks[0::2], marks[1::2]))
    res = stream_check.all_stream_check(records, windows, end_mark, events, has_spin=has_spin,
                                        gap_streams=gap_streams, per_call=True)
    per_call = res.get("per_call") or []
    out = []
    for k in range(n):
        mine = [u for u, o in zip(per_call, owner) if o == k]
        escaped = sum(1 for u, e, o in zip(per_call, events, owner)
                      if o == k and u > stream_check.ESCAPE_ABS_MS + stream_check.ESCAPE_REL * e)
        out.append({"checked": res.get("checked", False), "calls": len(mine),
                    "escaped_calls": escaped, "max_uncovered_ms": max(mine) if mine else 0.0,
                    "outside_windows": res.get("outside_windows", 0),
                    "unchecked_calls": res.get("unchecked_calls", 0),
                    "ok": bool(res.get("checked")) and escaped == 0
                    and res.get("outside_windows", 0) == 0 and res.get("unchecked_calls", 0) == 0})
    return out

