"""The evaluator's job defaults: the one statement of what a job gets for a field it leaves out.

The worker sends this table in its ready line (`job_defaults`, with `baselines`), so a client
sends only what it chose and reads the rest from there (docs/lua-api.md, "Job").
"""
from . import timing

# the tolerance a job gets when it names none: one of judge/compare.py's TOLERANCE_SETS (a test
# holds them together)
DEFAULT_TOLERANCE = "strict"

# every baseline the reference child can time beside a candidate, in the order results list them
BASELINES = ("eager", "compile", "compile_max_autotune")
# the baselines every reported figure is timed against (a start kernel's, a search's best, a
# sweep's speedups): the agents and `kagent-eval check` read them from here (the ready line's
# `reported_baselines`)
REPORTED_BASELINES = BASELINES[:2]

JOB = {
    "dtype": "fp32", "trials": 5, "seed": 42, "tolerance": DEFAULT_TOLERANCE,
    "fallback_policy": "reject", "fallback_threshold": 0.5, "library": "own", "audit": True,
    "properties": True,
    "nonfinite": "report", "generalize": False, "require_generalize": False, "confirm": False,
    # a timed job times its candidate alone unless it names the baselines to time beside it
    "bench": dict(timing.BENCH_DEFAULTS, baselines=[], do_bench=False),
    # the metric set every client of the evaluator profiled with (ncu_metrics.resolve(None) too)
    "profile": {"metric_set": "full"},
}

