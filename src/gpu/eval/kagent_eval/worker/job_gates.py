"""One job's steps in the worker (jobs.Evaluator.run): an ordered list of gates over the job's
context, each returning None (the job goes on) or the failed result (it stops there). Their order
is the order of the checks, which decides the error a job that fails several of them reports."""
import time
from dataclasses import dataclass
from typing import Any

from ..judge import audit as audit_mod
from ..common import fingerprint, loader
from ..judge import compare, early_checks, review_verdict
from ..profile import pyprofile
from . import host_load
from ..sandbox import sandbox
from . import compile_step, noise, remeasure
from ..judge import static_checks
from . import sanitize_op
from ..judge import timed_verdict
from ..judge import trust, verdict, verdict_library


@dataclass
class Checked:
    """What the gates of one job share."""
    ev: Any            # the Evaluator
    spec: dict         # the job, normalized (job_spec.py)
    result: dict       # the result being built
    ref_trials: dict = None  # the reference's trials, by index
    base: Any = None   # the baselines the reference timed
    out: Any = None    # the candidate's process: its messages and outcome
    rtol: float = None
    atol: float = None
    host_loaded: bool = False  # the host's CPUs oversubscribed while the candidate ran (host_load.py)
    pyprofile: Any = None  # cProfile of the checks after the candidate's process (pyprofile.py)
    early: Any = None  # the trials' comparisons begun while the process ran (early_checks.py)

    @property
    def trial0(self):
        return self.ref_trials[0]


def static(c):
    """The candidate's source: its fingerprint, and the static checks (ESTATIC)."""
    result = c.result
    source, _ = loader.source_of(c.spec["candidate"])
    result["fingerprint"] = fingerprint.of_source(source)
    findings = static_checks.scan(source)
    result["audit"]["static_findings"] = findings
    for f in findings:
        tag = "static:" + f["rule"]
        if tag in trust.TRUST_RULES and tag not in result["flags"]:
            result["flags"].append(tag)
    rejects = static_checks.rejecting(findings, not c.ev.cuda)
    if rejects:
        f = rejects[0]
        return verdict.fail(result, "audit", "ESTATIC", "%s at line %d: %s" % (
            f["rule"], f["line"], f["text"]))
    return None


def reference(c):
    """The reference's trials and baselines (EREFERENCE), and the job's tolerances."""
    spec, result = c.spec, c.result
    phases = result["worker_s"] = {"static": time.monotonic() - result["started_at"]}
    t = time.monotonic()
    c.ref_trials, c.base, err = c.ev.refs.get(spec)
    phases["reference"] = time.monotonic() - t
    result["reference_s"] = c.ev.refs.last_s
    if c.ev.refs.last_stage_s:
        result["reference_stage_s"] = c.ev.refs.last_stage_s
    if err:
        return verdict.fail(result, "load", "EREFERENCE", err)
    result["replay_seed"] = spec["replay_seed"]
    memory = c.ev.refs.memory(spec, c.trial0)
    if memory is not None:  # what the pool admits the problem's jobs by (gpu_memory.py)
        result["memory"] = memory
    c.rtol, c.atol = compare.tolerances(spec["dtype"], spec["rtol"], spec["atol"],
                                        spec["tolerance"])
    result["tolerance"] = {"rtol": c.rtol, "atol": c.atol}
    return None


def candidate(c):
    """The candidate's process, run to its last message (it exits meanwhile), and where its time
    went."""
    spec, result, trial0, phases = c.spec, c.result, c.trial0, c.result["worker_s"]
    poison = sum(m["numel"] * 4 for m in trial0["outputs"] if m.get("kind") == "tensor")
    skipped = [i for i, t in c.ref_trials.items() if t.get("skipped")]
    # the problem's input contract as the reference found it (inputs.py): the candidate's
    # trials transform their inputs by it as the reference's did, bit for bit
    cspec = dict(spec, poison_bytes=poison, skip_trials=skipped,
                 input_contract=trial0.get("input_contract"),
                 fake_noisy_clock=spec["bench"] is not None and noise.fake_noisy_window())
    t = time.monotonic()
    window = host_load.Window()
    if early_checks.enabled(c.ev.cuda):
        c.early = early_checks.EarlyTrials(c.ref_trials, c.rtol, c.atol, c.ev.sample_seed,
                                           _kernelbench(spec), spec["nonfinite"])
    out = c.out = c.ev.run_candidate(cspec, defer_exit=True,
                                     on_message=c.early.offer if c.early is not None else None)
    c.host_loaded = window.loaded()
    c.ev.exiting = out
    # the child's last message is in: the worker's own checks start here (the child exits
    # meanwhile, sandbox.finish_exit)
    checked_at = time.monotonic()
    phases["candidate"] = checked_at - t
    first_stage = next((o["t"] for o, _ in out.messages if o.get("type") == "stage"), None)
    if first_stage is not None:
        phases["to_first_stage"] = first_stage - t  # the spare's readiness, or a fork
    stage_s = out.stage_durations()
    for name, s in (result.get("stage_s") or {}).items():  # the compile step's (compile_step.py)
        stage_s[name] = stage_s.get(name, 0.0) + s
    result["stage_s"] = stage_s
    # when each stage first began, on the host's monotonic clock (CLOCK_MONOTONIC: the same
    # clock as kagent.time.now()), so jobs of several workers can be laid on one timeline
    result["stage_at"] = {}
    for o, _ in out.messages:
        if o.get("type") == "stage":
            result["stage_at"].setdefault(o["stage"], o["t"])
    result["stage_at"]["verdict"] = checked_at
    if getattr(out, "exit_s", None) is not None:
        result["stage_s"]["exit"] = out.exit_s  # process teardown after its last message
    result["worker_s"] = phases
    prepared = getattr(out, "prepared", None) or {}
    result["prepared"] = bool(prepared)
    if prepared:
        result["prepare_s"] = prepared.get("prepare_s")
        result["warmed"] = dict(prepared.get("warmed") or {})
        on_device, _ = out.first("warmed")
        result["warmed"].update((on_device or {}).get("parts") or {})
    used, _ = out.first("memory")
    if used and used.get("peak_bytes") is not None and result.get("memory"):
        result["memory"]["candidate_peak_bytes"] = used["peak_bytes"]
    loaded, _ = out.first("loaded")
    profiled, _ = out.first("pyprofile")
    if profiled and pyprofile.enabled():
        result.setdefault("pyprofile", {})["child"] = str(profiled.get("text"))[:pyprofile.MAX_CHARS]
    if loaded:
        result["candidate_kind"] = loaded.get("kind")
        parts = loaded.get("build_parts")
        if isinstance(parts, dict):  # the candidate's process's own account: diagnostics only
            result["build_parts"] = {str(k): v for k, v in parts.items() if isinstance(v, (int, float))}
            result["build_parts"]["imported_inductor"] = loaded.get("imported_inductor") is True
    return None


def trials(c):
    """Every trial's outputs against the reference's."""
    spec = c.spec
    ok = verdict.check_trials(c.result, c.ref_trials, c.out, c.rtol, c.atol, c.ev.sample_seed,
                              spec["nonfinite"], _kernelbench(spec), c.early)
    if c.early is not None:
        c.result["worker_s"]["early_trials"] = c.early.taken
    return None if ok else c.result


def _kernelbench(spec):
    """What check_trials needs to record the KernelBench outcomes of a job's trials."""
    return {"dtype": spec["dtype"], "tolerance": spec["tolerance"], "problem": spec["problem"]}


def outcome(c):
    """How the candidate's process ended."""
    return c.result if verdict.failure_from_outcome(c.result, c.out) else None


def trial_count(c):
    result = c.result
    if result.get("trials", 0) < c.spec["trials"]:
        return verdict.fail(result, "run", "ERUN", "only %d of %d trials ran" % (
            result.get("trials", 0), c.spec["trials"]))
    return None


def review(c):
    """The reviewer's inputs (job option extra_trials, judged by review_verdict.py): EREVIEW
    where one fails."""
    if c.spec["extra_trials"] is None:
        return None
    if not review_verdict.check(c.result, c.spec, c.ref_trials, c.out, c.rtol, c.atol,
                              c.ev.sample_seed):
        return c.result
    return None


def generalization(c):
    """The problem resized, where the job asks for it (EGENERALIZE where it requires it)."""
    spec, result = c.spec, c.result
    if not spec["generalize"]:
        return None
    verdict.check_generalization(result, c.ref_trials, c.out, c.rtol, c.atol, c.ev.sample_seed)
    if spec["require_generalize"] and result["generalizes"] == "no":
        return verdict.fail(result, "correctness", "EGENERALIZE",
                            "the kernel fails on the problem resized to %s: %s" % (
                                result["generalization"][0].get("sizes"),
                                result["generalization"][0].get("reason")))
    return None


def code_notes(c):
    """What the candidate's code did besides its outputs: threads it started, what it compiled."""
    th, _ = c.out.first("threads")
    if th and th.get("after", 0) > th.get("before", 0):
        c.result["flags"].append("threads_started")
    comp, _ = c.out.first("compiled")
    if comp:
        c.result["compiled_fingerprint"] = comp.get("fingerprint")
    return None


def timed_outputs(c):
    """Every timed call's output against its input set's reference (ESTALE), before the audit:
    a candidate that returns a stale or cached output launches nothing on the audit's traced call
    either, and that call alone would call it a fallback (EFALLBACK) instead."""
    if c.spec["bench"] is None:
        return None
    b, arrays = c.out.first("benchmark")
    if b is None:
        return None  # benchmark() fails the job for it
    if timed_verdict.check_timed_outputs(c.result, b, arrays, *_timed_checks(c), c.ev.sample_seed):
        return c.result
    return None


def _timed_checks(c):
    """(reference trials, the candidate's own trials, rtol, atol): what a timed call's output is
    held to, here and in the re-measure (remeasure.confirm_figures)."""
    own = {o["trial"]: o for o, _ in c.out.of_type("trial") if isinstance(o.get("trial"), int)}
    return c.ref_trials, own, c.rtol, c.atol


def audit(c):
    """The kernels one forward ran (a fallback to PyTorch's own rejects or flags)."""
    spec = c.spec
    if spec["audit"] and c.ev.cuda:
        k, _ = c.out.first("kernels")
        own = audit_mod.own_kernel_names(loader.source_of(spec["candidate"])[0])
        if k is not None and not verdict_library.apply_audit(
                c.result, k.get("kernels") or [], spec["fallback_policy"],
                spec["fallback_threshold"], spec["library"], own):
            return c.result
    return None


def benchmark(c):
    """The timing: every timed call's output, the report against the worker's clock, the
    baselines and the roofline, and no figure before it is trusted (remeasure.py)."""
    spec, result, ev = c.spec, c.result, c.ev
    if spec["bench"] is None:
        return None
    b, arrays = c.out.first("benchmark")
    if b is None:
        return verdict.fail(result, "benchmark", "ERUN", "no benchmark report")
    # every timed call's output was checked before the audit (timed_outputs)
    if timed_verdict.apply_benchmark(result, b, arrays, timed_verdict.loop_ms(c.out),
                                     c.ref_trials.get(timed_verdict.last_call_trial(b), c.trial0),
                                     c.rtol, c.atol, ev.sample_seed, "cuda" if ev.cuda else "cpu",
                                     c.host_loaded):
        return result
    timed_verdict.apply_baselines(result, c.base)
    remeasure.apply_roofline(ev, spec, result, c.trial0)
    if not remeasure.confirm_figures(ev, spec, result, c.trial0, _timed_checks(c)):
        return result
    return None


def profile(c):
    """The profile's metrics, where the job asks for them."""
    if c.spec["profile"] is None:
        return None
    p, _ = c.out.first("profile")
    if p is not None:
        c.result["profile"] = p.get("result")
        if isinstance(p.get("result"), dict) and "metrics" in p["result"]:
            c.result["metrics"] = p["result"]["metrics"]
    elif not c.ev.cuda:
        c.result["profile"] = {"ok": False, "error": "ENOTSUP: profiling needs a GPU"}
    return None


def sanitize(c):
    """compute-sanitizer after the verdict, once the candidate's process is gone."""
    if not c.spec["sanitize"]:
        return None
    c.ev.wait_exit(c.result)
    if not sanitize_op.verdict_of(c.ev, c.spec, c.result):
        return c.result
    return None


def timed(gate, c):
    """Runs one gate; the ones after the candidate's process (its `verdict` phase) add their
    seconds to worker_s.checks, so that phase's cost can be told apart by gate."""
    t = time.monotonic()
    checking = "verdict" in (c.result.get("stage_at") or {}) and gate is not candidate
    if checking and c.pyprofile is not None:
        c.pyprofile.enable()
    try:
        failed = gate(c)
    finally:
        if checking and c.pyprofile is not None:
            c.pyprofile.disable()
    if c.out is not None:
        sandbox.note_exit(c.out)  # the candidate's process exits meanwhile: when it was gone
    phases = c.result.get("worker_s")
    if phases is not None and checking:
        phases.setdefault("checks", {})[gate.__name__] = time.monotonic() - t
    return failed


GATES = (static, reference, compile_step.gate, candidate, trials, outcome, trial_count, review,
         generalization, code_notes, timed_outputs, audit, benchmark, profile, sanitize)
