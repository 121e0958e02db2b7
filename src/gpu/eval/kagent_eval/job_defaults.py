"""The evaluator's job defaults: the one statement of what a job gets for a field it leaves out.

The worker sends this table in its ready line (`job_defaults`, with `baselines`), so a client
sends only what it chose and reads the rest from there (docs/lua-api.md, "Job").
"""
from . import compare, timing

# every baseline the reference child can time beside a candidate, in the order results list them
BASELINES = ("eager", "compile", "compile_max_autotune")

JOB = {
    "dtype": "fp32", "trials": 5, "seed": 42, "tolerance": compare.DEFAULT_TOLERANCE,
    "fallback_policy": "reject", "fallback_threshold": 0.5, "audit": True, "properties": True,
    "nonfinite": "report", "generalize": False, "require_generalize": False, "confirm": False,
    # a timed job times its candidate alone unless it names the baselines to time beside it
    "bench": dict(timing.BENCH_DEFAULTS, baselines=[], do_bench=False),
    # the metric set every client of the evaluator profiled with (ncu_metrics.resolve(None) too)
    "profile": {"metric_set": "full"},
}


def ready_fields():
    """What the worker's ready line carries of the defaults."""
    return {"job_defaults": JOB, "baselines": list(BASELINES)}
