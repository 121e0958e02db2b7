"""What the worker's ready line carries of the job defaults (common/job_defaults.py) and of the
rules the pool needs before it sends a job: the baselines, the tolerance names, the compile step's
bound and the sources that take it."""
from ..child import ext_build
from ..common import job_defaults
from ..judge import compare
from ..sandbox import sandbox


def fields():
    """job_defaults, baselines, reported_baselines; tolerances: the names a job's `tolerance` may
    take (compare.TOLERANCE_SETS, their one statement); compile_step_s: the bound of a load_inline
    candidate's compile step (child_compile.py), outside the job's `timeout`, which the pool adds
    to such a job's wall limit (kagent/gpu/jobs.lua) where the candidate's source names one of
    compile_markers (ext_build.MARKERS)."""
    return {"job_defaults": job_defaults.JOB, "baselines": list(job_defaults.BASELINES),
            "reported_baselines": list(job_defaults.REPORTED_BASELINES),
            "tolerances": list(compare.TOLERANCE_SETS),
            "compile_step_s": sandbox.DEFAULT_TIMEOUTS[ext_build.STAGE],
            "compile_markers": list(ext_build.MARKERS)}
