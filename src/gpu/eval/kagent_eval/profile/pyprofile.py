"""Where a job's Python time goes, for the harness benchmark (bench/harness_profile.py): with
KAGENT_EVAL_PYPROFILE=1 in the worker's environment (the sandbox passes the evaluator's own
settings on to its children), the candidate's process profiles its job with
cProfile and sends the functions that took the most cumulative time, and the worker does the
same for its own checks after that process's last message (their comparisons of the trials'
outputs then run one after another in the profiled thread, not on a few threads at once). Both
come back in the result as `pyprofile` = {"child": text, "worker_checks": text}. A diagnostic for
the people tuning the harness: it slows what it profiles, the child's text is the untrusted
process's own account, and neither enters a verdict."""
import cProfile
import io
import os
import pstats

ENV = "KAGENT_EVAL_PYPROFILE"
TOP = 30  # functions listed
MAX_CHARS = 20000


def enabled():
    return os.environ.get(ENV, "") not in ("", "0")


def new():
    """A profiler to enable around the worker's checks, or None where profiling is off."""
    return cProfile.Profile() if enabled() else None


def text(profile):
    """The TOP functions by cumulative time; a profiler that saw nothing (a job that ended
    before its checks) says so."""
    buf = io.StringIO()
    try:
        stats = pstats.Stats(profile, stream=buf)
    except TypeError:  # pstats refuses a profile with no calls in it
        return "nothing profiled"
    stats.sort_stats("cumulative").print_stats(TOP)
    return buf.getvalue()[:MAX_CHARS]


def run_profiled(send, fn, *args):
    """fn(*args) under cProfile; send(text) with its listing, whatever fn does."""
    profile = cProfile.Profile()
    profile.enable()
    try:
        return fn(*args)
    finally:
        profile.disable()
        send(text(profile))
