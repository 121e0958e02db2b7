"""The library policy (job field `library`): how much of a candidate's GPU time may be vendor
libraries' kernels (cuBLAS, cuDNN, CUTLASS, ATen's: audit.is_library_kernel) and CUDA graphs'.

  own   the candidate's own kernels carry at least `fallback_threshold` of its GPU time
        (KernelAgent's rule, the default);
  some  libraries and graphs are allowed, but at least one of the candidate's own kernels runs
        on the audited call (KernelSkill's: keep one custom kernel);
  any   correctness and time only (KernelBench's).

A candidate that breaks its policy is a fallback: EFALLBACK at stage "audit" with
`fallback_policy = "reject"`, the flag `fallback` with "flag". Whatever the policy, every result
says what carried its time: `own_share` (0..1, the own kernels' share of the audited call's
GPU time) and `library_kernels` (names), or, where no kernel was profiled (CPU mode, a job with
no audit, one that ended before it, a call that ran no kernel), `own_share_unknown` with the
reason and no number. So a figure carried by cuBLAS is never taken for a kernel's.
"""
from . import audit as audit_mod

POLICIES = ("own", "some", "any")
MAX_NAMES = 50


def unknown_share(result, why):
    """The result before any audit: no share, and why."""
    result.update(own_share_unknown=why, library_kernels=[])
    result.pop("own_share", None)


def apply_audit(result, kernels, policy, threshold, library="own", own_names=()):
    """The audit of one call's kernels ([{name, time_ms, calls}]) under the job's library policy
    and fallback_policy; False where the job fails for it. own_names: the __global__ functions
    the candidate's source defines (audit.own_kernel_names)."""
    v = audit_mod.classify(kernels, threshold, own_names)
    result["kernels"] = kernels
    names = [k["name"] for k in kernels if k.get("own") is False]
    result["library_kernels"] = names[:MAX_NAMES]
    if v["kernel_time_ms"] > 0:
        result["own_share"] = v["own_time_frac"]
        result.pop("own_share_unknown", None)
    else:
        unknown_share(result, "the audited call ran no kernel")
        result["library_kernels"] = names[:MAX_NAMES]
    breach = breach_of(library, v, kernels)
    v["fallback"] = breach is not None  # under the job's policy
    result["audit"].update(v, library=library)
    if breach is None:
        return True
    result["flags"].append("fallback")
    if policy == "reject":
        result.update(ok=False, stage="audit", code="EFALLBACK", error="EFALLBACK: " + breach)
        return False
    return True


def breach_of(library, v, kernels):
    """Why the audit `v` of `kernels` breaks the policy `library`, or None."""
    shown = ", ".join(v["flagged_kernels"][:3]) or "none"
    if library == "any":
        return None
    if library == "some":
        if any(k.get("own") and (k.get("time_ms", 0) > 0 or k.get("calls", 0) > 0)
               for k in kernels):
            return None
        return ("library = \"some\" needs at least one of the candidate's own kernels on every "
                "call; the audited call ran none (library kernels: %s)" % shown)
    if v["fallback"]:
        return "the candidate's own kernels carry %.0f%% of its GPU time (library kernels: %s)" % (
            100 * v["own_time_frac"], shown)
    return None
