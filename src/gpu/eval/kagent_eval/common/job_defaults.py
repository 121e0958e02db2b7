"""The evaluator's job defaults: the one statement of what a job gets for a field it leaves out.

The worker sends this table in its ready line (`job_defaults`, with `baselines`), so a client
sends only what it chose and reads the rest from there (docs/lua-api.md, "Job").
"""
from . import timing
from ..judge import compare

# every baseline the reference child can time beside a candidate, in the order results list them
BASELINES = ("eager", "compile", "compile_max_autotune")
# the baselines every reported figure is timed against (a start kernel's, a search's best, a
# sweep's speedups): the agents and `kagent-eval check` read them from here (the ready line's
# `reported_baselines`)
REPORTED_BASELINES = BASELINES[:2]

JOB = {
    "dtype": "fp32", "trials": 5, "seed": 42, "tolerance": compare.DEFAULT_TOLERANCE,
    "fallback_policy": "reject", "fallback_threshold": 0.5, "library": "own", "audit": True,
    "properties": True,
    "nonfinite": "report", "generalize": False, "require_generalize": False, "confirm": False,
    # a timed job times its candidate alone unless it names the baselines to time beside it
    "bench": dict(timing.BENCH_DEFAULTS, baselines=[], do_bench=False),
    # the metric set every client of the evaluator profiled with (ncu_metrics.resolve(None) too)
    "profile": {"metric_set": "full"},
}


def ready_fields():
    """What the worker's ready line carries of the defaults. tolerances: the names a job's
    `tolerance` may take (compare.TOLERANCE_SETS, their one statement). compile_step_s: the bound of a
    load_inline candidate's compile step (child_compile.py), outside the job's `timeout`, which
    the pool adds to such a job's wall limit (kagent/gpu/jobs.lua) where the candidate's source
    names one of compile_markers (ext_build.MARKERS)."""
    from ..child import ext_build
    from ..sandbox import sandbox
    return {"job_defaults": JOB, "baselines": list(BASELINES), "reported_baselines": list(REPORTED_BASELINES),
            "tolerances": list(compare.TOLERANCE_SETS),
            "compile_step_s": sandbox.DEFAULT_TIMEOUTS[ext_build.STAGE],
            "compile_markers": list(ext_build.MARKERS)}
