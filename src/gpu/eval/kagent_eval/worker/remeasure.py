"""Fail closed (trust.py): no figure of a job is accepted before it is confirmed. The flags of its
timing, and where a flag asks for it a hardened re-measure in a fresh process that must agree
(job_gates.py calls it)."""
from ..child import child_candidate
from ..judge import timed_verdict, trust, verdict
from ..sandbox import sandbox
from . import host_load, noise
from .stage_lease import follow_stage


def apply_roofline(ev, spec, result, trial0):
    """The roofline of the job's figure, and its speedups over the baselines."""
    roof = ev.refs.roofline(spec, trial0, result["time_ms"].get("median"))
    if roof is not None:
        result["roofline"] = roof
    timed_verdict.speedups(result)


def confirm_figures(ev, spec, result, trial0, checked):
    """Applies trust.TRUST_RULES to the timing; re-measures in a fresh process where a
    flag asks for it. False (and the job failed) when a figure stays untrusted, or is not
    measured because the machine stayed noisy (noise.py). checked: (reference trials, the
    candidate's own trials, rtol, atol) for its outputs."""
    peaks = ev.refs.peaks(spec)
    first = result["time_ms"]
    flags = trust.figure_flags(first, result.get("roofline"), peaks, ev.cuda, spec["max_spread"])
    triggers = [f for f in result["flags"]
                if trust.TRUST_RULES.get(f, ("",))[0] == "trigger"]
    result["trust"] = {"first_flags": flags + triggers, "remeasured": False}
    if not (spec["confirm"] or trust.needs_remeasure(flags + triggers)):
        return True
    ev.wait_exit(result)
    hspec = dict(spec, hardened=True, audit=False, profile=None,
                 bench=dict(spec["bench"] or {}, reps=max(10, min(200, first.get("n") or 50))))
    result["trust"]["remeasured"] = True
    figures, controls = [first], []
    # the control's earlier figure: the reference's eager baseline of this job, where it has one
    earlier = (result.get("baseline_times") or {}).get(noise.CONTROL_NAME)
    waits, strikes = list(noise.BACKOFF_S), 0
    while True:
        probe = hardened_measure(ev, dict(hspec, fake_noisy_clock=noise.fake_noisy_window()),
                                 trial0, checked)
        if probe.get("error"):
            return not trust.fail_without_figures(
                result, probe["stage"], probe["code"],
                "in the hardened re-measure: " + probe["error"].split(": ", 1)[1])
        second = probe["time_ms"]
        figures.append(second)
        roof2 = ev.refs.roofline(spec, trial0, second.get("median"))
        flags2 = trust.figure_flags(second, roof2, peaks, ev.cuda, spec["max_spread"])
        if not ev.cuda:
            flags2 += [f for f in triggers if f == "threads_started"]  # nothing traces threads
        if not trust.agree(first, second, ev.cuda):
            flags2.append("remeasure_disagrees")
        if "clock_unchecked" in (probe.get("flags") or ()):
            flags2.append("clock_unchecked")
        result["trust"]["second_flags"] = flags2
        if not flags2:
            break  # the only way out that keeps a figure: a hardened re-measure with no flag
        spread = "spread" in set(flags2) | set(result["trust"]["first_flags"])
        if not set(flags2) <= trust.NOISE_FLAGS:
            trust.reject_untrusted(result, flags2, _trust_detail(figures, spread))
            return False
        if not strikes and not controls:
            # the first re-measure only noise objects to is taken once more before any control:
            # a burst seldom hits two in a row, and the second comes straight after the first
            # (a control's child between them would run in its window)
            strikes += 1
            result["trust"].setdefault("rounds", []).append(
                {"flags": flags2, "kernel_spread": second.get("spread"), "control": None,
                 "machine_noisy": None})
            continue
        # only objections a busy machine raises too, twice: the control, in the same window
        window = host_load.Window()  # the host's load while the control runs, the candidate gone
        control, why = ev.refs.control(spec)
        host_loaded = window.loaded()
        if control is None:  # fail closed: the noise stays unexplained
            trust.reject_untrusted(result, flags2, _join(_trust_detail(figures, spread),
                                                         "the control could not be timed: %s" % why))
            return False
        controls.append(control)
        noisy = noise.control_noisy(control, earlier, spec["max_spread"], ev.cuda, host_loaded)
        result["trust"].setdefault("rounds", []).append(
            {"flags": flags2, "kernel_spread": second.get("spread"),
             "control": {k: control.get(k) for k in ("median", "spread", "n")},
             "host_loaded": host_loaded, "machine_noisy": noisy})
        earlier = control
        if noisy and not waits:
            noise.not_measured(result, flags2, _trust_detail(figures, True), controls, ev.cuda)
            return False
        if noisy:
            noise.sleep(waits.pop(0))
            continue
        strikes += 1
        if strikes >= noise.KERNEL_STRIKES:  # noisy while the control was steady: the kernel's
            trust.reject_untrusted(result, flags2, _join(_trust_detail(figures, True),
                                                         noise.control_text(controls, True)))
            return False
    result["time_ms_first"], result["time_ms_hardened"] = first, second
    if result["trust"]["first_flags"]:
        # a flagged first figure is not trusted: the re-measure's stands
        result["time_ms"] = second
    # else the first figure stands, confirmed by the re-measure: it was timed the way the
    # baselines were (the same rotated input sets), so its speedups compare one method; the
    # hardened loop's new inputs before every call are slower on a CPU (no cache flush), and
    # divided by a rotated eager they read as a slowdown (src/gpu/eval/README.md, "Fail closed")
    apply_roofline(ev, spec, result, trial0)
    result["flags"] = [f for f in result["flags"] if f not in trust.TRUST_RULES]
    return True


def hardened_measure(ev, hspec, trial0, checked):
    """One hardened timing in a fresh process: a probe result with time_ms, or failed. The
    process stops at the gates a spare has (stage_lease.follow_stage): it loads and builds the
    candidate under the lease shared (its Triton compiles under none) and holds it exclusive from
    its gate before the timing to its exit, so the seconds of its start and build hold back no
    other job's timing."""
    window = host_load.Window()
    try:
        out = sandbox.run_child(child_candidate.run, (hspec,), hspec["timeouts"],
                                gate=lambda name: follow_stage(ev.lease, name))
    finally:
        ev.lease.release()
    if ev.lease.enabled and ev.cuda and out.out_of_gpu_memory():
        # it built beside the other workers' processes: once more with the GPU to itself
        window = host_load.Window()
        with ev.lease.timed():
            out = sandbox.run_child(child_candidate.run, (hspec,), hspec["timeouts"])
    loaded = window.loaded()
    probe = {"checks": {}, "flags": [], "audit": {}}
    b, arrays = out.first("benchmark")
    ref_trials, _, rtol, atol = checked
    if not verdict.failure_from_outcome(probe, out) and b is None:
        verdict.fail(probe, "timing", "ERUN", "no timing came back")
    if not probe.get("error"):
        timed_verdict.check_timed_outputs(probe, b, arrays, *checked, ev.sample_seed)
    if not probe.get("error"):
        timed_verdict.apply_benchmark(probe, b, arrays, timed_verdict.loop_ms(out),
                                      ref_trials.get(timed_verdict.last_call_trial(b), trial0),
                                      rtol, atol, ev.sample_seed, "cuda" if ev.cuda else "cpu",
                                      loaded)
    return probe


def _trust_detail(figures, spread=False):
    """Counts that explain a rejection without repeating an untrusted figure; with `spread`, each
    loop's p90/p10 too (a ratio of its calls, not a figure of the kernel's speed). figures: the
    first loop's summary, then each re-measure's."""
    named = [("first" if i == 0 else "re-measure", t) for i, t in enumerate(figures)]
    parts = []
    if spread:
        known = ["%s %.3g" % (name, (t or {})["spread"]) for name, t in named
                 if isinstance((t or {}).get("spread"), (int, float))]
        if known:
            parts.append("p90/p10 of the calls: " + ", ".join(known))
    for name, t in named:
        s = (t or {}).get("all_streams") or {}
        if s.get("escaped_calls") or s.get("outside_windows"):
            parts.append("%s: %d of %d calls with work outside the events, %d records outside "
                         "every call" % (name, s.get("escaped_calls", 0), s.get("calls", 0),
                                         s.get("outside_windows", 0)))
        elif s.get("checked") is False and s.get("why"):
            parts.append("%s: streams not checked: %s" % (name, s["why"]))
    return "; ".join(parts) or None


def _join(*parts):
    return "; ".join(p for p in parts if p) or None
