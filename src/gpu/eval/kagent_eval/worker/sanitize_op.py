"""The sanitize op, worker side: compute-sanitizer (sanitizer.py) on one forward of a candidate,
in a sandboxed child; and the verdict of a job that asked for it. Runs in the worker, which never
executes candidate code (the tools run it, in the child's process tree)."""
import time

from ..judge import verdict
from ..profile import sanitizer
from ..sandbox import sandbox
from . import job_spec
from ..common.request import BadRequest


def run(ev, job):
    """memcheck and racecheck (or job["tools"]) on one forward of the candidate. ok is True
    (clean), False (the tools found errors) or None (they could not judge: no GPU, no
    compute-sanitizer, the forward failed under them)."""
    t0 = time.monotonic()
    spec = job_spec.normalize(ev, "verify", job)
    tools = (job or {}).get("tools") or list(sanitizer.TOOLS)
    if not isinstance(tools, list) or not all(t in sanitizer.TOOLS for t in tools):
        raise BadRequest("tools must be a list of %s" % ", ".join(sanitizer.TOOLS))
    spec.update(tools=tools, tool_timeout=float((job or {}).get("tool_timeout", 600)))
    if not ev.cuda:
        return {"ok": None, "error": "ENOTSUP: compute-sanitizer needs a GPU (CPU mode)",
                "elapsed": time.monotonic() - t0}
    # the tools run at once; one may run again alone, and racecheck again at full size
    limit = spec["tool_timeout"] * (len(tools) + 1) + 60
    with ev.lease.timed():  # the tools replay the forward many times: nothing else is timed
        out = sandbox.run_child(sanitizer.run_child, (spec,), dict(spec["timeouts"],
                                                                    sanitize=limit))
    res, _ = out.first("sanitize")
    result = dict((res or {}).get("result") or {})
    if res is None:
        result = {"ok": None, "error": "%s: %s" % (out.failure or ("EWORKER", "no report"))}
    result["elapsed"] = time.monotonic() - t0
    return result

def verdict_of(ev, spec, result):
    """For jobs with "sanitize": a kernel the tools find errors in is rejected; one they
    cannot judge is rejected too (fail closed), with their reason."""
    report = run(ev, dict(spec["job"], tools=spec["sanitize"]))
    result["sanitizer"] = report
    if report.get("ok"):
        return True
    if report.get("ok") is False:
        bad = [t for t, r in (report.get("tools") or {}).items() if r.get("ok") is False]
        return not verdict.fail(result, "sanitize", "ESANITIZE", "%s found %s" % (
            " and ".join(bad), "; ".join(
                "%s error(s) in %s" % (report["tools"][t].get("errors"), t) for t in bad)))
    return not verdict.fail(result, "sanitize", "ESANITIZE",
                            "compute-sanitizer could not check the kernel: %s" % (
                                report.get("error") or "; ".join(
                                    r.get("report", "")[:300]
                                    for r in (report.get("tools") or {}).values())))
