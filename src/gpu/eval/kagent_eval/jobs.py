"""Job orchestration in the worker: static checks, reference child, candidate child, verdict."""
import os
import random
import time

from . import child_candidate, compare, compile_gate, fingerprint, loader, sandbox, sanitizer
from . import spare as spare_mod
from . import compare_op, job_defaults, sanitize_op, static_checks, timed_verdict, timing, trust, verdict
from .lease import EXCLUSIVE, SHARED, Lease
from .reference import ReferenceCache
from .request import BadRequest

DEFAULTS = job_defaults.JOB
# the lease mode a spare's child waits for at each of its gates (spare.GATE_STAGES)
LEASE_AT_GATE = {"gate": EXCLUSIVE, "gate_shared": SHARED}
OPS_WITH = {  # op -> (audit, bench, profile)
    "verify": (False, False, False),
    "benchmark": (True, True, False),
    "profile": (False, False, True),
    "evaluate": (True, True, True),
}


def follow_stage(lease, name):
    """What a spare's child asks of the worker's lease by announcing a stage; True when the child
    waits at a gate for the worker to open it. At a gate the worker gets the lease in that gate's
    mode. At "compile_host" the child compiles on the CPU with its GPU work finished and waits at
    a gate before it launches again (compile_gate.py), and at "gpu_done" its GPU work is over and
    it exits, so a shared hold is given back; an exclusive one never is: its timed stages may not
    be over."""
    if name in LEASE_AT_GATE:
        lease.acquire(LEASE_AT_GATE[name])
        return True
    if name in (compile_gate.STAGE, child_candidate.GPU_DONE) and lease.mode == SHARED:
        lease.release()
    return False


class Evaluator:
    _exiting = None  # this job's candidate process while it exits (_wait_exit)

    def __init__(self, device, threads=None, protocol_fd=None, lease=None, share=None):
        self.device = device
        # the GPU's lease (lease.py): none while nothing of the job runs on the GPU, shared
        # around untimed GPU work, exclusive through every timed or profiled phase; a worker
        # alone on its device never asks for it
        self.lease = lease or Lease(False, None, None)
        self.cuda = device.startswith("cuda")
        self.threads = threads
        self.close_fds = [protocol_fd] if protocol_fd is not None else []
        # secret to the candidate until it is forked: where multi-GB outputs are sampled
        self.sample_seed = random.SystemRandom().randrange(1, 2 ** 31)
        # the seed of property trials and resized problems: new per worker (per device where
        # its workers share their references: device_share.py), reported with every result so
        # a failure can be replayed (job "replay_seed")
        self.replay_seed = random.SystemRandom().randrange(1, 2 ** 31)
        if share is not None:
            seeds = share.seeds()
            self.sample_seed, self.replay_seed = seeds["sample_seed"], seeds["replay_seed"]
        self.refs = ReferenceCache(self.close_fds, self.lease, self.cuda, share)
        # a candidate sandbox prepared ahead of the next job (KAGENT_EVAL_SPARE=0 turns it off)
        self.use_spare = os.environ.get("KAGENT_EVAL_SPARE", "1") != "0"
        self.spare = None
        self._refill_spare()

    def _refill_spare(self):
        if self.use_spare and self.spare is None:
            self.spare = spare_mod.Spare(child_candidate.prepare, child_candidate.run,
                                         (self.device, self.threads), self.close_fds)

    def close(self):
        if self.spare is not None:
            self.spare.discard()
            self.spare = None
        if self.refs.share is not None:
            self.refs.share.close()

    def run_candidate(self, cspec, defer_exit=False):
        """The candidate's child for a job: the prepared spare when there is one, else a fresh
        fork; the next spare starts preparing meanwhile (it needs no lease). The spare's child
        holds no lease until its first gate; at each gate the worker gets the lease in the mode
        the child asks for (shared for the build and the trials, exclusive for the timed and
        profiled stages, shared again for the late trials, none for its exit). A child that ran out
        of GPU memory beside the other workers' processes is run once more in a fresh process
        holding the lease exclusive throughout (result.retried_alone)."""
        current, self.spare = self.spare, None
        self._refill_spare()

        def on_stage(name):
            if follow_stage(self.lease, name):
                current.open_gate()  # its deadline starts now

        cspec = dict(cspec, shared_device=self.lease.enabled)
        try:
            out = current.run(cspec, cspec["timeouts"], on_stage, defer_exit) \
                if current is not None else None
            if out is None:
                # a child forked on demand has no gate to stop at: it holds the lease
                # exclusive throughout when it has anything to time
                timed = child_candidate.times_anything(cspec)
                with self.lease.held(EXCLUSIVE if timed else SHARED):
                    out = self._fork_candidate(cspec)
            elif self.lease.enabled and self.cuda and out.out_of_gpu_memory():
                # the GPU's memory was shared with the other workers' processes: once more with
                # the GPU to itself, so that only a candidate that runs out alone fails for it
                sandbox.finish_exit(out)
                with self.lease.held(EXCLUSIVE):
                    out = self._fork_candidate(cspec)
                out.retried_alone = True
        finally:
            self.lease.release()
        return out

    def _fork_candidate(self, cspec):
        return sandbox.run_child(child_candidate.run, (cspec,), cspec["timeouts"], self.close_fds)

    # -- job normalisation -------------------------------------------------------------
    def normalize(self, op, job):
        if not isinstance(job, dict):
            raise BadRequest("job must be an object")
        problem, candidate = job.get("problem"), job.get("candidate")
        if not isinstance(problem, str) or not os.path.isfile(problem):
            raise BadRequest("problem must be the path of a file: %r" % (problem,))
        if not isinstance(candidate, str) or not candidate:
            raise BadRequest("candidate must be a path or source text")
        dtype = _field(job, "dtype")
        if dtype not in loader.DTYPES:
            raise BadRequest("dtype must be fp32, bf16 or fp16")
        trials = int(_field(job, "trials"))
        if trials < 1 or trials > 100:
            raise BadRequest("trials must be 1..100")
        timeouts = {}
        if job.get("timeout"):
            t = float(job["timeout"])
            timeouts = {k: t for k in sandbox.DEFAULT_TIMEOUTS
                        if k not in ("start", "baseline", "gate", "gate_shared")}
        timeouts.update(job.get("timeouts") or {})
        audit, bench, profile = OPS_WITH[op]
        bench_opts = dict(job.get("bench") or {}) if bench else None
        if bench_opts is not None and "baselines" not in bench_opts:
            bench_opts["baselines"] = list(DEFAULTS["bench"]["baselines"])
        if bench_opts is not None and bench_opts.get("stop", DEFAULTS["bench"]["stop"]) \
                not in timing.STOPS:
            raise BadRequest("bench.stop must be one of %s" % ", ".join(timing.STOPS))
        return {
            "op": op, "problem": os.path.abspath(problem), "candidate": candidate, "dtype": dtype,
            "trials": trials, "seed": int(_field(job, "seed")), "timeouts": timeouts,
            "rtol": job.get("rtol"), "atol": job.get("atol"),
            "tolerance": _choice(job, "tolerance", tuple(compare.TOLERANCE_SETS)),
            "fallback_policy": _field(job, "fallback_policy"),
            "fallback_threshold": float(_field(job, "fallback_threshold")),
            # the kernel audit's profiler start-up is paid by the spare sandbox ahead of the job;
            # callers that only rank known-clean kernels may still turn it off
            "audit": audit and bool(_field(job, "audit")), "bench": bench_opts,
            "profile": dict(DEFAULTS["profile"], **(job.get("profile") or {})) if profile else None,
            "sol_ms": job.get("sol_ms"), "device": self.device, "threads": self.threads,
            "sample_seed": self.sample_seed,
            "replay_seed": int(job.get("replay_seed", self.replay_seed)),
            "properties": bool(_field(job, "properties")),
            "nonfinite": _choice(job, "nonfinite", ("report", "require")),
            "generalize": bool(_field(job, "generalize")),
            "require_generalize": bool(_field(job, "require_generalize")),
            # confirm: always re-measure in a fresh process and require the two to agree
            "confirm": bool(_field(job, "confirm")),
            "max_spread": float(job["max_spread"]) if job.get("max_spread") else None,
            "sanitize": _sanitize_tools(job.get("sanitize")),
            "job": {k: v for k, v in job.items() if k != "sanitize"},
        }

    # -- one job ------------------------------------------------------------------------
    def run(self, op, job):
        t0 = time.monotonic()
        spec = self.normalize(op, job)
        result = {"ok": False, "stage": "load", "checks": {}, "flags": [],
                  "audit": {"applicable": self.cuda, "static_findings": []},
                  "device": self.device, "dtype": spec["dtype"],
                  "started_at": t0}  # on stage_at's clock: what comes before the first stage shows
        try:
            self._run(spec, result)
        finally:
            # the candidate's process exits while its results are checked; it is gone before
            # the reply (and before anything else of this worker runs)
            if "stage_at" in result:
                result["worker_s"]["verdict"] = time.monotonic() - result["stage_at"]["verdict"]
            self._wait_exit(result)
            result["elapsed"] = time.monotonic() - t0
        return result

    def _run(self, spec, result):
        source, _ = loader.source_of(spec["candidate"])
        result["fingerprint"] = fingerprint.of_source(source)
        findings = static_checks.scan(source)
        result["audit"]["static_findings"] = findings
        for f in findings:
            tag = "static:" + f["rule"]
            if tag in trust.TRUST_RULES and tag not in result["flags"]:
                result["flags"].append(tag)
        rejects = static_checks.rejecting(findings, not self.cuda)
        if rejects:
            f = rejects[0]
            return verdict.fail(result, "audit", "ESTATIC", "%s at line %d: %s" % (
                f["rule"], f["line"], f["text"]))

        phases = result["worker_s"] = {"static": time.monotonic() - result["started_at"]}
        t = time.monotonic()
        ref_trials, base, err = self.refs.get(spec)
        phases["reference"] = time.monotonic() - t
        result["reference_s"] = self.refs.last_s
        if err:
            return verdict.fail(result, "load", "EREFERENCE", err)
        result["replay_seed"] = spec["replay_seed"]
        rtol, atol = compare.tolerances(spec["dtype"], spec["rtol"], spec["atol"],
                                        spec["tolerance"])
        result["tolerance"] = {"rtol": rtol, "atol": atol}
        trial0 = ref_trials[0]
        poison = sum(m["numel"] * 4 for m in trial0["outputs"] if m.get("kind") == "tensor")
        skipped = [i for i, t in ref_trials.items() if t.get("skipped")]
        # the problem's input contract as the reference found it (inputs.py): the candidate's
        # trials transform their inputs by it as the reference's did, bit for bit
        cspec = dict(spec, poison_bytes=poison, skip_trials=skipped,
                     input_contract=trial0.get("input_contract"))
        t = time.monotonic()
        out = self.run_candidate(cspec, defer_exit=True)
        self._exiting = out
        # the child's last message is in: the worker's own checks start here (the child exits
        # meanwhile, sandbox.finish_exit)
        checked_at = time.monotonic()
        phases["candidate"] = checked_at - t
        first_stage = next((o["t"] for o, _ in out.messages if o.get("type") == "stage"), None)
        if first_stage is not None:
            phases["to_first_stage"] = first_stage - t  # the spare's readiness, or a fork
        result["stage_s"] = _stage_durations(out)
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
        if getattr(out, "retried_alone", False):
            result["retried_alone"] = True
        loaded, _ = out.first("loaded")
        if loaded:
            result["candidate_kind"] = loaded.get("kind")
        if not verdict.check_trials(result, ref_trials, out, rtol, atol, self.sample_seed,
                                    spec["nonfinite"], {"dtype": spec["dtype"],
                                                        "tolerance": spec["tolerance"],
                                                        "problem": spec["problem"]}):
            return result
        if verdict.failure_from_outcome(result, out):
            return result
        if result.get("trials", 0) < spec["trials"]:
            return verdict.fail(result, "run", "ERUN", "only %d of %d trials ran" % (
                result.get("trials", 0), spec["trials"]))
        if spec["generalize"]:
            verdict.check_generalization(result, ref_trials, out, rtol, atol, self.sample_seed)
            if spec["require_generalize"] and result["generalizes"] == "no":
                return verdict.fail(result, "correctness", "EGENERALIZE",
                                    "the kernel fails on the problem resized to %s: %s" % (
                                        result["generalization"][0].get("sizes"),
                                        result["generalization"][0].get("reason")))
        th, _ = out.first("threads")
        if th and th.get("after", 0) > th.get("before", 0):
            result["flags"].append("threads_started")
        comp, _ = out.first("compiled")
        if comp:
            result["compiled_fingerprint"] = comp.get("fingerprint")

        if spec["audit"] and self.cuda:
            k, _ = out.first("kernels")
            if k is not None and not verdict.apply_audit(
                    result, k.get("kernels") or [], spec["fallback_policy"],
                    spec["fallback_threshold"]):
                return result
        if spec["bench"] is not None:
            b, arrays = out.first("benchmark")
            if b is None:
                return verdict.fail(result, "benchmark", "ERUN", "no benchmark report")
            # every timed call's output first: it names the call that went wrong
            own = {o["trial"]: o for o, _ in out.of_type("trial") if isinstance(o.get("trial"), int)}
            checked = (ref_trials, own, rtol, atol)
            if timed_verdict.check_timed_outputs(result, b, arrays, *checked, self.sample_seed):
                return result
            if timed_verdict.apply_benchmark(result, b, arrays, self._loop_ms(out),
                                       ref_trials.get(timed_verdict.last_call_trial(b), trial0), rtol,
                                       atol, self.sample_seed, "cuda" if self.cuda else "cpu"):
                return result
            timed_verdict.apply_baselines(result, base)
            self._apply_roofline(spec, result, trial0)
            if not self._confirm_figures(spec, result, trial0, checked):
                return result
        if spec["profile"] is not None:
            p, _ = out.first("profile")
            if p is not None:
                result["profile"] = p.get("result")
                if isinstance(p.get("result"), dict) and "metrics" in p["result"]:
                    result["metrics"] = p["result"]["metrics"]
            elif not self.cuda:
                result["profile"] = {"ok": False, "error": "ENOTSUP: profiling needs a GPU"}
        if spec["sanitize"]:
            self._wait_exit(result)
        if spec["sanitize"] and not sanitize_op.verdict_of(self, spec, result):
            return result
        result.update(ok=True, stage="done")
        return result

    def _wait_exit(self, result=None):
        """The candidate's process of this job is gone once this returns (it was left to exit
        while its results were checked): before the reply and before any other GPU work of the
        job (a re-measure, the sanitizer)."""
        out, self._exiting = self._exiting, None
        if out is None:
            return
        t = time.monotonic()
        sandbox.finish_exit(out)
        if result is not None and "stage_s" in result:
            result["worker_s"]["exit_wait"] = time.monotonic() - t
            if out.exit_s is not None:
                result["stage_s"]["exit"] = out.exit_s

    def _apply_roofline(self, spec, result, trial0):
        roof = self.refs.roofline(spec, trial0, result["time_ms"].get("median"))
        if roof is not None:
            result["roofline"] = roof
        timed_verdict.speedups(result)

    # -- fail closed: no figure is accepted before it is confirmed -------------------------
    def _confirm_figures(self, spec, result, trial0, checked):
        """Applies trust.TRUST_RULES to the timing; re-measures in a fresh process where a
        flag asks for it. False (and the job failed) when a figure stays untrusted. checked:
        (reference trials, the candidate's own trials, rtol, atol) for its outputs."""
        peaks = self.refs.peaks(spec)
        first = result["time_ms"]
        flags = trust.figure_flags(first, result.get("roofline"), peaks, self.cuda,
                                     spec["max_spread"])
        triggers = [f for f in result["flags"]
                    if trust.TRUST_RULES.get(f, ("",))[0] == "trigger"]
        result["trust"] = {"first_flags": flags + triggers, "remeasured": False}
        if not (spec["confirm"] or trust.needs_remeasure(flags + triggers)):
            return True
        self._wait_exit(result)
        hspec = dict(spec, hardened=True, audit=False, profile=None,
                     bench=dict(spec["bench"] or {}, reps=max(10, min(200, first.get("n") or 50))))
        result["trust"]["remeasured"] = True
        for attempt in range(1, trust.HARDENED_TRIES + 1):
            with self.lease.timed():
                probe = self._hardened_measure(hspec, trial0, checked)
            if probe.get("error"):
                return not trust.fail_without_figures(
                    result, probe["stage"], probe["code"],
                    "in the hardened re-measure: " + probe["error"].split(": ", 1)[1])
            second = probe["time_ms"]
            roof2 = self.refs.roofline(spec, trial0, second.get("median"))
            flags2 = trust.figure_flags(second, roof2, peaks, self.cuda, spec["max_spread"])
            if not self.cuda:
                flags2 += [f for f in triggers if f == "threads_started"]  # nothing traces threads
            if not trust.agree(first, second, self.cuda):
                flags2.append("remeasure_disagrees")
            result["trust"]["second_flags"] = flags2
            noise_only = flags2 and set(flags2) <= trust.NOISE_FLAGS
            if attempt == trust.HARDENED_TRIES or not noise_only:
                break
            result["trust"].setdefault("noisy_remeasures", []).append(flags2)
        if flags2:
            trust.reject_untrusted(result, flags2, _trust_detail(first, second))
            return False
        result["time_ms_first"] = first
        result["time_ms"] = second
        self._apply_roofline(spec, result, trial0)
        result["flags"] = [f for f in result["flags"] if f not in trust.TRUST_RULES]
        return True

    def _hardened_measure(self, hspec, trial0, checked):
        """One hardened timing in a fresh process: a probe result with time_ms, or failed."""
        out = sandbox.run_child(child_candidate.run, (hspec,), hspec["timeouts"], self.close_fds)
        probe = {"checks": {}, "flags": [], "audit": {}}
        b, arrays = out.first("benchmark")
        ref_trials, _, rtol, atol = checked
        if not verdict.failure_from_outcome(probe, out) and b is None:
            verdict.fail(probe, "timing", "ERUN", "no timing came back")
        if not probe.get("error"):
            timed_verdict.check_timed_outputs(probe, b, arrays, *checked, self.sample_seed)
        if not probe.get("error"):
            timed_verdict.apply_benchmark(probe, b, arrays, self._loop_ms(out),
                                    ref_trials.get(timed_verdict.last_call_trial(b), trial0), rtol,
                                    atol, self.sample_seed, "cuda" if self.cuda else "cpu")
        return probe

    def sanitize(self, job):
        return sanitize_op.run(self, job)

    def compare(self, job):
        return compare_op.run(self, job)

    @staticmethod
    def _loop_ms(out):
        """Worker-clock ms the candidate spent in its timed loop: every "benchmark_loop" stretch
        (a hardened loop leaves it for "benchmark_prep" before each call)."""
        total, start = 0.0, None
        for obj, _ in out.messages:
            if obj.get("type") != "stage":
                continue
            if start is not None:
                total += obj["t"] - start
                start = None
            if obj.get("stage") == "benchmark_loop":
                start = obj["t"]
        return total * 1e3 if total > 0 else None


def _trust_detail(first, second):
    """Counts that explain a rejection without repeating an untrusted figure."""
    parts = []
    for name, t in (("first", first), ("re-measure", second)):
        s = (t or {}).get("all_streams") or {}
        if s.get("escaped_calls") or s.get("outside_windows"):
            parts.append("%s: %d of %d calls with work outside the events, %d records outside "
                         "every call" % (name, s.get("escaped_calls", 0), s.get("calls", 0),
                                         s.get("outside_windows", 0)))
        elif s.get("checked") is False and s.get("why"):
            parts.append("%s: streams not checked: %s" % (name, s["why"]))
    return "; ".join(parts) or None


def _sanitize_tools(value):
    """job["sanitize"]: false/absent, true (memcheck and racecheck) or a list of tools."""
    if not value:
        return None
    if value is True:
        return list(sanitizer.TOOLS)
    if isinstance(value, list) and value and all(t in sanitizer.TOOLS for t in value):
        return value
    raise BadRequest("sanitize must be true or a list of %s" % ", ".join(sanitizer.TOOLS))


def _field(job, key):
    """A job's field, or its default (job_defaults.JOB)."""
    return job.get(key, DEFAULTS[key])


def _choice(job, key, allowed):
    value = _field(job, key)
    if value not in allowed:
        raise BadRequest("%s must be one of %s; got %r" % (key, ", ".join(allowed), value))
    return value


def _stage_durations(out):
    """Seconds the candidate's process spent in each stage it announced."""
    marks = [(o["stage"], o["t"]) for o, _ in out.messages if o.get("type") == "stage"]
    end = max([o.get("t", 0) for o, _ in out.messages] + [m[1] for m in marks] + [0])
    durations = {}
    for i, (stage, t) in enumerate(marks):
        t_next = marks[i + 1][1] if i + 1 < len(marks) else end
        durations[stage] = durations.get(stage, 0.0) + (t_next - t)
    return durations
