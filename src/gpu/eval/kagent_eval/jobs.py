"""Job orchestration in the worker: static checks, reference child, candidate child, verdict."""
import collections
import json
import os
import random
import time

from . import child_candidate, child_reference, compare, fingerprint, loader, sandbox
from . import spare as spare_mod
from . import static_checks, verdict

OPS_WITH = {  # op -> (audit, bench, profile)
    "verify": (False, False, False),
    "benchmark": (True, True, False),
    "profile": (False, False, True),
    "evaluate": (True, True, True),
}
DEFAULT_BASELINES = ["eager", "compile"]


class BadRequest(Exception):
    pass


class Evaluator:
    def __init__(self, device, threads=None, protocol_fd=None):
        self.device = device
        self.cuda = device.startswith("cuda")
        self.threads = threads
        self.close_fds = [protocol_fd] if protocol_fd is not None else []
        # secret to the candidate until it is forked: where multi-GB outputs are sampled
        self.sample_seed = random.SystemRandom().randrange(1, 2 ** 31)
        self.ref_cache = collections.OrderedDict()
        self.base_cache = {}
        self.flops_cache = {}  # problem key -> FLOPs of one reference forward
        # a candidate sandbox prepared ahead of the next job (KAGENT_EVAL_SPARE=0 turns it off)
        self.use_spare = os.environ.get("KAGENT_EVAL_SPARE", "1") != "0"
        self.spare = None
        self._refill_spare()

    def _refill_spare(self):
        if self.use_spare and self.spare is None:
            self.spare = spare_mod.Spare(child_candidate.prepare, child_candidate.run,
                                         (self.device, self.threads), self.close_fds)

    def settle(self):
        """Let the spare finish preparing, so its start-up work does not overlap a timing."""
        if self.spare is not None:
            self.spare.wait_ready()

    def close(self):
        if self.spare is not None:
            self.spare.discard()
            self.spare = None

    def _run_candidate(self, cspec):
        current, self.spare = self.spare, None
        self._refill_spare()  # the next job's sandbox prepares during this job's untimed stages
        following = self.spare

        def on_stage(name):
            if name == "gate":
                if following is not None:
                    following.pause()
                current.open_gate()

        try:
            out = current.run(cspec, cspec["timeouts"], on_stage) if current is not None else None
        finally:
            if following is not None:
                following.resume()
        if out is None:
            self.settle()
            out = sandbox.run_child(child_candidate.run, (cspec,), cspec["timeouts"],
                                    self.close_fds, reads=cspec["reads"])
        return out

    # -- job normalisation -------------------------------------------------------------
    def normalize(self, op, job):
        if not isinstance(job, dict):
            raise BadRequest("job must be an object")
        problem, candidate = job.get("problem"), job.get("candidate")
        if not isinstance(problem, str) or not os.path.isfile(problem):
            raise BadRequest("problem must be the path of a file: %r" % (problem,))
        if not isinstance(candidate, str) or not candidate:
            raise BadRequest("candidate must be a path or source text")
        dtype = job.get("dtype", "fp32")
        if dtype not in loader.DTYPES:
            raise BadRequest("dtype must be fp32, bf16 or fp16")
        trials = int(job.get("trials", 5))
        if trials < 1 or trials > 100:
            raise BadRequest("trials must be 1..100")
        timeouts = {}
        if job.get("timeout"):
            t = float(job["timeout"])
            timeouts = {k: t for k in sandbox.DEFAULT_TIMEOUTS
                        if k not in ("start", "baseline", "gate")}
        timeouts.update(job.get("timeouts") or {})
        audit, bench, profile = OPS_WITH[op]
        bench_opts = dict(job.get("bench") or {}) if bench else None
        if bench_opts is not None and "baselines" not in bench_opts:
            bench_opts["baselines"] = list(DEFAULT_BASELINES)
        return {
            "op": op, "problem": os.path.abspath(problem), "candidate": candidate, "dtype": dtype,
            "trials": trials, "seed": int(job.get("seed", 42)), "timeouts": timeouts,
            "rtol": job.get("rtol"), "atol": job.get("atol"),
            "fallback_policy": job.get("fallback_policy", "reject"),
            "fallback_threshold": float(job.get("fallback_threshold", 0.5)),
            # the kernel audit's profiler start-up is paid by the spare sandbox ahead of the job;
            # callers that only rank known-clean kernels may still turn it off
            "audit": audit and bool(job.get("audit", True)), "bench": bench_opts,
            "profile": (job.get("profile") or {"metric_set": "sol"}) if profile else None,
            "sol_ms": job.get("sol_ms"), "device": self.device, "threads": self.threads,
            "sample_seed": self.sample_seed,
            # the files the sandboxed children may read besides the system's (jail.narrow_reads)
            "reads": [os.path.abspath(p) for p in (problem, candidate) if loader.source_of(p)[1]],
        }

    # -- reference (trusted child), cached per problem ------------------------------------
    def _problem_key(self, spec):
        st = os.stat(spec["problem"])
        return (spec["problem"], st.st_mtime_ns, st.st_size, spec["dtype"], spec["seed"])

    def reference(self, spec):
        """(trials, baselines or None, error or None)."""
        pkey = self._problem_key(spec)
        rkey = pkey + (spec["trials"],)
        bench = spec["bench"]
        bkey = None
        if bench is not None:
            bkey = pkey + (json.dumps(bench, sort_keys=True),)
        trials = self.ref_cache.get(rkey)
        base = self.base_cache.get(bkey) if bkey else None
        want_outputs = trials is None
        want_base = bench is not None and base is None and bench.get("baselines")
        if want_outputs or want_base:
            rspec = dict(spec, want_outputs=want_outputs,
                         baselines=list(bench["baselines"]) if want_base else None)
            if want_base:
                self.settle()
            out = sandbox.run_child(child_reference.run, (rspec,), spec["timeouts"], self.close_fds,
                                    reads=spec["reads"], role="trusted")
            self.last_reference_s = out.elapsed
            err = out.failure or None
            e, _ = out.first("error")
            if err or e:
                msg = err[1] if err else "%s: %s" % (e.get("error_type"), e.get("message"))
                return None, None, "EREFERENCE: the reference failed in stage %s: %s" % (out.stage, msg)
            if want_outputs:
                f, _ = out.first("flops")
                if f is not None and f.get("value") is not None:
                    self.flops_cache[pkey] = f["value"]
                trials = verdict.reference_trials(out)
                self.ref_cache[rkey] = trials
                while len(self.ref_cache) > 2:
                    self.ref_cache.popitem(last=False)
            if want_base:
                b, _ = out.first("baselines")
                base = (b or {}).get("result")
                self.base_cache[bkey] = base
        return trials, base, None

    # -- one job ------------------------------------------------------------------------
    def run(self, op, job):
        t0 = time.monotonic()
        spec = self.normalize(op, job)
        result = {"ok": False, "stage": "load", "checks": {}, "flags": [],
                  "audit": {"applicable": self.cuda, "static_findings": []},
                  "device": self.device, "dtype": spec["dtype"]}
        try:
            self._run(spec, result)
        finally:
            result["elapsed"] = time.monotonic() - t0
        return result

    def _run(self, spec, result):
        source, _ = loader.source_of(spec["candidate"])
        result["fingerprint"] = fingerprint.of_source(source)
        findings = static_checks.scan(source)
        result["audit"]["static_findings"] = findings
        for f in findings:
            tag = "static:" + f["rule"]
            if tag not in result["flags"] and (self.cuda or f["rule"] not in (
                    "torch_compute_in_wrapper", "calls_reference")):
                result["flags"].append(tag)
        rejects = static_checks.rejecting(findings, not self.cuda)
        if rejects:
            f = rejects[0]
            return verdict.fail(result, "audit", "ESTATIC", "%s at line %d: %s" % (
                f["rule"], f["line"], f["text"]))

        self.last_reference_s = 0.0
        ref_trials, base, err = self.reference(spec)
        result["reference_s"] = self.last_reference_s
        if err:
            return verdict.fail(result, "load", "EREFERENCE", err.split(": ", 1)[1])
        rtol, atol = compare.tolerances(spec["dtype"], spec["rtol"], spec["atol"])
        result["tolerance"] = {"rtol": rtol, "atol": atol}
        poison = 0
        for m in ref_trials[0]["outputs"]:
            if m.get("kind") == "tensor":
                poison += m["numel"] * 4
        cspec = dict(spec, poison_bytes=poison, ref_flops=self.flops_cache.get(self._problem_key(spec)))
        out = self._run_candidate(cspec)
        result["stage_s"] = _stage_durations(out)
        if getattr(out, "exit_s", None) is not None:
            result["stage_s"]["exit"] = out.exit_s  # process teardown after its last message
        prepared = getattr(out, "prepared", None) or {}
        result["prepared"] = bool(prepared)
        if prepared:
            result["prepare_s"], result["warmed"] = prepared.get("prepare_s"), prepared.get("warmed")
        loaded, _ = out.first("loaded")
        if loaded:
            result["candidate_kind"] = loaded.get("kind")
        if not verdict.check_trials(result, ref_trials, out, rtol, atol, self.sample_seed):
            return result
        if verdict.failure_from_outcome(result, out):
            return result
        if result.get("trials", 0) < spec["trials"]:
            return verdict.fail(result, "run", "ERUN", "only %d of %d trials ran" % (
                result.get("trials", 0), spec["trials"]))
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
            loop_ms = self._loop_ms(out)
            if verdict.apply_benchmark(result, b, arrays, loop_ms, ref_trials[0], rtol, atol,
                                       self.sample_seed, "cuda" if self.cuda else "cpu"):
                return result
            verdict.apply_baselines(result, base)
            r, _ = out.first("roofline")
            if r is not None:
                result["roofline"] = r.get("result")
            sol = spec.get("sol_ms") or (result.get("roofline") or {}).get("lower_bound_ms")
            med = result["time_ms"].get("median")
            if sol and med and med < 0.98 * float(sol):
                result["flags"].append("beyond_sol")
        if spec["profile"] is not None:
            p, _ = out.first("profile")
            if p is not None:
                result["profile"] = p.get("result")
                if isinstance(p.get("result"), dict) and "metrics" in p["result"]:
                    result["metrics"] = p["result"]["metrics"]
            elif not self.cuda:
                result["profile"] = {"ok": False, "error": "ENOTSUP: profiling needs a GPU"}
        result.update(ok=True, stage="done")
        return result

    @staticmethod
    def _loop_ms(out):
        start = end = None
        for obj, _ in out.messages:
            if obj.get("type") == "stage" and obj.get("stage") == "benchmark_loop":
                start = obj["t"]
            if obj.get("type") == "stage" and obj.get("stage") == "benchmark_check":
                end = obj["t"]
        return (end - start) * 1e3 if start is not None and end is not None else None


def _stage_durations(out):
    """Seconds the candidate's process spent in each stage it announced."""
    marks = [(o["stage"], o["t"]) for o, _ in out.messages if o.get("type") == "stage"]
    end = max([o.get("t", 0) for o, _ in out.messages] + [m[1] for m in marks] + [0])
    durations = {}
    for i, (stage, t) in enumerate(marks):
        t_next = marks[i + 1][1] if i + 1 < len(marks) else end
        durations[stage] = durations.get(stage, 0.0) + (t_next - t)
    return durations
