"""A job as the worker receives it, checked and with the defaults of what it leaves out filled in
(job_defaults.py): the spec that the job's children and checks read (jobs.py)."""
import os

from ..common import extra_trials, in_model, job_defaults, loader, stop_rule
from ..judge import compare, verdict_library
from ..profile import sanitizer
from ..sandbox import sandbox
from ..common.request import BadRequest

OPS_WITH = {  # op -> (audit, bench, profile)
    "verify": (False, False, False),
    "benchmark": (True, True, False),
    "profile": (False, False, True),
    "evaluate": (True, True, True),
}
DEFAULTS = job_defaults.JOB


def normalize(ev, op, job):
    """The spec of a job of `op` on the evaluator `ev`: the job checked (BadRequest), the
    defaults of what it leaves out filled in."""
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
    try:
        extra = extra_trials.normalize(job.get("extra_trials"))
    except ValueError as e:
        raise BadRequest(str(e))
    timeouts = {}
    if job.get("timeout"):
        t = float(job["timeout"])
        # the baselines keep their own limit, torch.compile's compile of the model included
        # (unleased_compile.STAGE): a job's timeout is sized for a candidate, not for that
        timeouts = {k: t for k in sandbox.DEFAULT_TIMEOUTS
                    if k not in ("start", "baseline", "compile_unleased", "gate", "gate_shared",
                                 "compile_source")}  # nvcc's own bound (child_compile.py)
    timeouts.update(job.get("timeouts") or {})
    audit, bench, profile = OPS_WITH[op]
    bench_opts = dict(job.get("bench") or {}) if bench else None
    if bench_opts is not None and "baselines" not in bench_opts:
        bench_opts["baselines"] = list(DEFAULTS["bench"]["baselines"])
    if bench_opts is not None and bench_opts.get("stop", DEFAULTS["bench"]["stop"]) \
            not in stop_rule.STOPS:
        raise BadRequest("bench.stop must be one of %s" % ", ".join(stop_rule.STOPS))
    return {
        "op": op, "problem": os.path.abspath(problem), "candidate": candidate, "dtype": dtype,
        "trials": trials, "seed": int(_field(job, "seed")), "timeouts": timeouts,
        "rtol": job.get("rtol"), "atol": job.get("atol"),
        "tolerance": _choice(job, "tolerance", tuple(compare.TOLERANCE_SETS)),
        "fallback_policy": _field(job, "fallback_policy"),
        "fallback_threshold": float(_field(job, "fallback_threshold")),
        "library": _choice(job, "library", verdict_library.POLICIES),
        # the kernel audit's profiler start-up is paid by the spare sandbox ahead of the job;
        # callers that only rank known-clean kernels may still turn it off
        "audit": audit and bool(_field(job, "audit")), "bench": bench_opts,
        "profile": dict(DEFAULTS["profile"], **(job.get("profile") or {})) if profile else None,
        "sol_ms": job.get("sol_ms"), "device": ev.device, "threads": ev.threads,
        # the GPU memory the pool admitted the job with (kagent/gpu/admission.lua): the timed
        # input sets and the probe's copies stay inside it (gpu_memory.py); none: alone
        "memory_budget_bytes": int(job["memory_budget_bytes"]) if job.get("memory_budget_bytes")
        else None,
        "sample_seed": ev.sample_seed,
        "replay_seed": int(job.get("replay_seed", ev.replay_seed)),
        "properties": bool(_field(job, "properties")),
        "nonfinite": _choice(job, "nonfinite", ("report", "require")),
        "generalize": bool(_field(job, "generalize")),
        "require_generalize": bool(_field(job, "require_generalize")),
        "extra_trials": extra,
        # the candidate judged inside a whole model, the job's problem (in_model.py)
        "in_model": in_model.normalize(job.get("in_model")),
        # confirm: always re-measure in a fresh process and require the two to agree
        "confirm": bool(_field(job, "confirm")),
        "max_spread": float(job["max_spread"]) if job.get("max_spread") else None,
        "sanitize": _sanitize_tools(job.get("sanitize")),
        "job": {k: v for k, v in job.items() if k != "sanitize"},
    }


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
