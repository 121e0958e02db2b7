"""A job's `in_model` field: the candidate (a kernel) judged inside a whole model.

The job's `problem` is the model (a KernelBench problem file: Model, get_inputs, get_init_inputs),
so its reference is the original model; its `candidate` is a kernel written for `kernel_problem`.
The candidate's process builds the model as the reference does (same seed, same weights) and puts
the kernel in place of every submodule at `paths` (dotted names) or of class `match_class`, built
by candidate_for, which integrate.py's check uses too (through the adapter's adapt(kernel,
target), or for its own problem and given the target's parameters). Everything after is a
benchmark job's: the trials check the model's outputs, the timed calls rotate input sets and are
checked, the spread rule and the hardened re-measure apply. So an in-model figure is a verified
figure like any other (docs/lua-api.md, the job field `in_model`).
"""
import os

from . import loader
from .request import BadRequest


def normalize(value):
    """The job's in_model field checked, its files read here (the candidate's sandbox sees the
    job's problem and candidate only), or None when the job has none."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise BadRequest("in_model must be an object {kernel_problem, paths | match_class, adapter}")
    out = {}
    for key in ("kernel_problem", "adapter"):
        path = value.get(key)
        if key == "adapter" and path is None:
            out[key] = None
            continue
        if not isinstance(path, str) or not os.path.isfile(path):
            raise BadRequest("in_model.%s must be the path of a file: %r" % (key, path))
        with open(path) as f:
            out[key] = f.read()
    paths, cls = value.get("paths"), value.get("match_class")
    if paths is not None and not (isinstance(paths, list) and paths
                                  and all(isinstance(p, str) and p for p in paths)):
        raise BadRequest("in_model.paths must be a list of dotted submodule names")
    if (paths is None) == (cls is None) or (cls is not None and not isinstance(cls, str)):
        raise BadRequest("in_model needs one of paths (a list) and match_class (a class name)")
    out["paths"], out["match_class"] = paths, cls
    return out


def targets(model, field):
    """[(dotted name, submodule)] that the kernel replaces; LookupError when there is none (or a
    path names no submodule): the job fails at load with the model's own classes named."""
    if field["paths"] is not None:
        found = []
        for p in field["paths"]:
            try:
                found.append((p, model.get_submodule(p)))
            except AttributeError:
                raise LookupError("in_model: the model has no submodule at %s" % p)
        return found
    found = [(n, m) for n, m in model.named_modules() if n and type(m).__name__ == field["match_class"]]
    if not found:
        classes = sorted({type(m).__name__ for n, m in model.named_modules() if n})[:40]
        raise LookupError("in_model: no submodule of class %s in the model (its classes: %s)" % (
            field["match_class"], ", ".join(classes) or "none"))
    return found


def adapted(torch, fn):
    """A callable as a module, so that it can take a submodule's place."""
    class Adapted(torch.nn.Module):
        def forward(self, *args, **kwargs):
            return fn(*args, **kwargs)
    return Adapted()


def candidate_for(torch, spec, kmod, kref, kinit, adapter, target, dtype, device):
    """The kernel as it replaces one target: through the adapter, or built as the evaluator builds
    a candidate for its own problem and given the target's matching parameters and buffers."""
    if adapter is not None:
        fn = adapter.adapt(kmod, target)
        if not callable(fn):
            raise TypeError("adapt() returned %s, not a callable" % type(fn).__name__)
        return adapted(torch, fn)
    cand = loader.build_candidate(torch, kmod, kref, kinit, spec["seed"], dtype, device)
    if isinstance(cand, torch.nn.Module):
        loader.copy_matching_state(torch, target, cand)
    return cand


def set_submodule(root, path, new):
    *parents, leaf = path.split(".")
    mod = root
    for p in parents:
        mod = getattr(mod, p)
    setattr(mod, leaf, new)


def build(torch, spec, kernel_module, model, dtype, device):
    """The model (built by the caller as the reference is) with the kernel in every target: the
    candidate of an in-model job. Runs in the candidate's sandbox (it executes the kernel)."""
    field = spec["in_model"]
    kprob = loader.load_module("kernel_problem", field["kernel_problem"])
    kinit = list(kprob.get_init_inputs())
    kref = loader.build_model(torch, kprob.Model, kinit, spec["seed"], dtype, device)
    adapter = loader.load_module("adapter", field["adapter"]) if field["adapter"] else None
    if adapter is not None and not callable(getattr(adapter, "adapt", None)):
        raise LookupError("in_model: the adapter file defines no adapt(kernel, target)")
    with torch.no_grad():
        for name, target in targets(model, field):
            cand = candidate_for(torch, spec, kernel_module, kref, kinit, adapter, target, dtype, device)
            set_submodule(model, name, cand)
    return model
