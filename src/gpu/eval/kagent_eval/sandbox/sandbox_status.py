"""What the sandbox gives on this machine, as the worker's ready line says it (jail.status), and
the layers a policy may require of it (KAGENT_EVAL_REQUIRE, README.md "Sandbox")."""
import os

from . import landlock, namespaces
from .sandbox_limits import SandboxError


# per layer a policy may require (KAGENT_EVAL_REQUIRE): the status values that mean it is absent
REQUIRABLE = {"writes": ("open",), "reads": ("open",), "network": ("open",),
              "process_limit": (None,), "memory_counts": (None, "private (rlimit)"),
              "shm": ("shared",), "signals": ("open",), "abstract_sockets": ("open",),
              "socket_paths": ("open",)}


def require(setting, st):
    """Fail closed: KAGENT_EVAL_REQUIRE names layers (status keys, comma-separated; "all": every
    one) the worker must have, or it does not start."""
    names = [n.strip() for n in setting.split(",") if n.strip()]
    if names == ["all"]:
        names = list(REQUIRABLE)
    unknown = [n for n in names if n not in REQUIRABLE]
    if unknown:
        raise SandboxError("KAGENT_EVAL_REQUIRE: unknown layer %s (known: %s, all)" % (
            ", ".join(unknown), ", ".join(REQUIRABLE)))
    absent = ["%s=%s" % (n, st.get(n)) for n in names if st.get(n) in REQUIRABLE[n]]
    if absent:
        raise SandboxError("KAGENT_EVAL_REQUIRE: this machine does not give %s (%s)" % (
            ", ".join(absent), "; ".join(st["missing"]) or "sandbox off"))


def of(s):
    """The status of a sandbox state (jail.setup's)."""
    return {"enabled": s["enabled"], "root": s["root"], "landlock_abi": s["landlock"],
            "writes": "landlock" if s["landlock"] else "open",
            "reads": "landlock" if s["landlock"] else "open",
            "network": "namespace" if s["namespaces"] else "seccomp" if s["net"] else "open",
            "memory_mb": s["memory_mb"] or None,
            "processes": ("namespace (%s)" % s["namespaces"]) if s["namespaces"] else "subreaper",
            "process_limit": s["process_limit"],
            "max_processes": (s["max_processes"] or None) if s["process_limit"] else None,
            "max_tasks_hard": (namespaces.task_cap(s["max_processes"])
                               if s["process_limit"] == "watch" else None),
            "memory_counts": ("all (cgroup)" if s["groups"] and s["groups"].has("memory")
                              else "private (rlimit)" if s["memory_mb"] else None),
            "shm": "private" if s["namespaces"] else "swept" if s["enabled"] else "shared",
            "signals": ("namespace" if s["namespaces"] else "landlock"
                        if landlock.scopes(s["landlock"]) else "open"),
            "abstract_sockets": ("namespace" if s["namespaces"] else "landlock"
                                 if landlock.scopes(s["landlock"]) else "open"),
            "socket_paths": socket_paths(s),
            "missing": list(s["missing"])}


def socket_paths(s):
    """How named UNIX sockets are kept from a job: the folders its mount namespace covers (where
    sockets live), and the folders under them bound back read-only; "open" without a namespace
    (its `missing` line says what a job can then reach)."""
    if not s["namespaces"]:
        return "open"
    view = s["view"]
    covered = [c for c in view.covered if os.path.lexists(c)
               and not any(c.startswith(o.rstrip("/") + "/") for o in view.covered)]
    return "hidden (namespace: %s covered; bound back: the job's folder and cache, its files%s)" % (
        ", ".join(covered), "".join(", " + p for p in view.bound_back))
