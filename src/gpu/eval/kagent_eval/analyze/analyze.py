"""The `analyze` op: static analysis for agents/fuse.lua, in a sandboxed child.

kind "problem": the problem's Model traced with torch.fx (symbolic_trace) and run once on the
  worker's device to learn every value's shape, dtype and spread. Each op gets a readable label,
  a category, and a functional form: a Python expression in which `${v:name}` stands for a value
  (a graph input or another op's result), `${p:qualname}` for a parameter or buffer and `${m}` for
  the op's own parameter-free layer (built from `module_ctor`). The functional program assembled
  from those expressions is run on the same inputs and must give the model's outputs: that
  self-check is what lets an agent rewrite any part of the graph as a small problem of its own.
  Shape arithmetic (sizes of tensors) is folded into constants, as the shapes are fixed.
  `shrink` (kind "problem", optional): the problem's size constants (inputs.size_constants: the
  batch and the extents get_inputs reads) lowered before the model and its inputs are made, so a
  model too large to run here is traced at small sizes (the CPU split check of docs/sweeps.md):
  the first of a few smaller settings at which the model runs is kept, and the result says
  `shrunk` {name: [from, to]}; its shapes are those of the smaller problem.
kind "ops": the problem's operations from its torch.fx trace, labelled and counted by category
  (fx_ops.py): {traced, labels, categories}; the model is not run where the plain trace works.
kind "forward": the candidate's ModelNew.forward traced with the candidate's own classes and
  functions as leaves: every call on its hot path, and which ones are not the candidate's own.
kind "inductor": a subgraph problem compiled by TorchInductor on the GPU, its emitted code made a
  standalone kernel file (inductor_kernel.py); `library` "allow" or "deny" (cuBLAS/cuDNN);
  `max_autotune` true: max-autotune, ATen and Triton GEMMs.
kind "integrate": a kernel checked inside a whole model (integrate.py): every matching submodule
  replaced, the model's output verified, each replaced submodule timed standalone; the model's
  own figure is a benchmark job's with the field `in_model` (in_model.py).
kind "merge": several kernel sources joined into one module (source_merge.py; parse only).

The op's handler runs in the worker; the work runs in a child forked like the other children, so
a problem or candidate that crashes or hangs takes only that child with it.
"""
import operator
import os
import time

from . import analyze_problem, fx_ops, fx_trace, inductor_kernel, integrate
from ..child import child_common, unleased_compile
from ..common import loader
from ..sandbox import sandbox
from . import source_merge
from ..common.request import BadRequest

KINDS = ("problem", "ops", "forward", "merge", "inductor", "integrate")


def handle(ev, job):
    """The worker's side: checks the job, runs the analysis in a child, returns its result."""
    t0 = time.monotonic()
    if not isinstance(job, dict):
        raise BadRequest("job must be an object")
    kind = job.get("kind", "problem")
    if kind not in KINDS:
        raise BadRequest("kind must be one of %s" % ", ".join(KINDS))
    spec = {"kind": kind, "device": ev.device, "threads": ev.threads,
            "dtype": job.get("dtype", "fp32"), "seed": int(job.get("seed", 42))}
    if spec["dtype"] not in loader.DTYPES:
        raise BadRequest("dtype must be fp32, bf16 or fp16")
    if kind == "merge":
        parts = job.get("parts")
        if not isinstance(parts, list) or not parts or not all(
                isinstance(p, dict) and isinstance(p.get("source"), str)
                and isinstance(p.get("prefix", ""), str) for p in parts):
            raise BadRequest("parts must be a list of {prefix, source}")
        spec["parts"] = [{"prefix": p.get("prefix", ""), "source": p["source"],
                          "label": str(p.get("label", i + 1))} for i, p in enumerate(parts)]
    else:
        problem = job.get("problem")
        if not isinstance(problem, str) or not os.path.isfile(problem):
            raise BadRequest("problem must be the path of a file: %r" % (problem,))
        spec["problem"] = os.path.abspath(problem)
        if kind == "forward":
            cand = job.get("candidate")
            if not isinstance(cand, str) or not cand:
                raise BadRequest("candidate must be a path or source text")
            spec["candidate"] = cand
        spec["shrink"] = job.get("shrink") is True
        if kind == "integrate":
            for key in ("kernel", "kernel_problem", "adapter"):
                if key == "adapter" and job.get(key) is None:
                    continue  # optional
                if not isinstance(job.get(key), str) or not os.path.isfile(job[key]):
                    raise BadRequest("%s must be the path of a file: %r" % (key, job.get(key)))
                with open(job[key]) as f:  # read here: the sandboxed child sees only the problem
                    spec[key] = f.read()
            if not (isinstance(job.get("match_class"), str) or isinstance(job.get("match_path"), str)):
                raise BadRequest("match_class or match_path is required")
            spec["match_class"], spec["match_path"] = job.get("match_class"), job.get("match_path")
            spec["reps"] = max(3, int(job.get("reps", 20)))
        if kind == "inductor":
            if job.get("library", "allow") not in ("allow", "deny"):
                raise BadRequest("library must be allow or deny")
            spec["library"] = job.get("library", "allow")
            if job.get("layout", "inductor") not in ("inductor", "eager"):
                raise BadRequest("layout must be inductor or eager")
            spec["layout"] = job.get("layout", "inductor")
            if not isinstance(job.get("max_autotune", False), bool):
                raise BadRequest("max_autotune must be true or false")
            spec["max_autotune"] = job.get("max_autotune", False)
    timeouts = {}
    if job.get("timeout"):
        timeouts = {k: float(job["timeout"]) for k in ("load", "trace", "run", "check", "time")}
    # the traced forward runs on the GPU and nothing of it is timed; integrate times submodules.
    # Inductor's compile gives the lease up (unleased_compile.py), unless it times kernels
    gate = None
    if kind == "inductor" and not inductor_kernel.times_kernels(spec) and ev.cuda:
        gate = unleased_compile.follow(ev.lease)
        if timeouts:
            timeouts[unleased_compile.STAGE] = timeouts["run"]
    with (ev.lease.timed() if kind == "integrate" else ev.lease.shared()):
        out = sandbox.run_child(_child, (spec,), timeouts, gate=gate)
    res, _ = out.first("analysis")
    if res is None:
        err, _ = out.first("error")
        if err is not None:
            msg = "ERUN: %s: %s" % (err.get("error_type"), err.get("message"))
        else:
            msg = "%s: %s" % (out.failure or ("EWORKER", "the analysis sent nothing"))
        return {"ok": False, "kind": kind, "stage": out.stage, "error": msg,
                "elapsed": time.monotonic() - t0}
    result = dict(res.get("result") or {})
    result.setdefault("ok", True)
    result["kind"], result["elapsed"] = kind, time.monotonic() - t0
    return result


def _child(ch, spec):
    if spec["kind"] == "merge":
        ch.stage("run")
        ch.send({"type": "analysis", "result": source_merge.merge(spec["parts"])})
        return
    ch.stage("load")
    torch = child_common.setup_torch(spec["device"], spec.get("threads"))
    if spec["kind"] == "problem":
        result = analyze_problem.analyze(torch, ch, spec)
    elif spec["kind"] == "ops":
        result = fx_ops.analyze(torch, ch, spec)
    elif spec["kind"] == "integrate":
        result = integrate.run(torch, ch, spec, analyze_problem.shrink)
    elif spec["kind"] == "inductor":
        result = inductor_kernel.make(torch, ch, spec)
    else:
        result = trace_forward(torch, ch, spec)
    ch.send({"type": "analysis", "result": result})


# ---- kind "forward": the hot path of a candidate -------------------------------------------------

def trace_forward(torch, ch, spec):
    """Every call ModelNew.forward makes, with the candidate's own classes and functions as
    leaves (their insides are the kernels); `foreign` lists the calls that are not its own."""
    import inspect
    device, dtype = spec["device"], loader.torch_dtype(torch, spec["dtype"])
    problem = loader.load_module("problem", spec["problem"])
    cand = loader.load_module("candidate", spec["candidate"])
    if not hasattr(cand, "ModelNew"):
        return {"ok": True, "traced": False, "trace_error": "only a ModelNew forward is traced"}
    init = list(problem.get_init_inputs())
    model = loader.build_model(torch, cand.ModelNew, init, spec["seed"], dtype, device)
    own_module = cand.__name__
    funcs = tuple(v for v in vars(cand).values()
                  if inspect.isfunction(v) and v.__module__ == own_module)

    class OwnLeaves(torch.fx.Tracer):
        def is_leaf_module(self, m, qualname):
            return type(m).__module__ == own_module or super().is_leaf_module(m, qualname)

    ch.stage("trace")
    fx_trace.unpack_compat(torch)  # `a, b = kernel(...)` unpacks the call's proxy
    try:
        graph = OwnLeaves(autowrap_functions=funcs).trace(model)
    except Exception as e:
        return {"ok": True, "traced": False,
                "trace_error": "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:300] if str(e) else "")}
    calls, foreign, own_outputs = [], [], set()
    for n in graph.nodes:
        if n.op not in ("call_module", "call_function", "call_method"):
            continue
        if n.op == "call_module":
            mod = model.get_submodule(n.target)
            own = type(mod).__module__ == own_module
            target = "%s (%s)" % (n.target, type(mod).__name__)
        elif n.op == "call_function":
            own = getattr(n.target, "__module__", None) == own_module
            target = getattr(n.target, "__name__", str(n.target))
            # unpacking the tuple a kernel returned is not compute
            if n.target is operator.getitem and n.args and getattr(n.args[0], "name", None) in own_outputs:
                own = True
        else:
            own = False
            target = "." + n.target
        if own:
            own_outputs.add(n.name)
        entry = {"node": n.name, "op": n.op, "target": target, "own": own}
        calls.append(entry)
        if not own:
            foreign.append(entry)
    return {"ok": True, "traced": True, "calls": calls, "foreign": foreign,
            "kernel_calls": sum(1 for c in calls if c["own"] and c["target"] != "getitem")}
