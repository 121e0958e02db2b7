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
kind "forward": the candidate's ModelNew.forward traced with the candidate's own classes and
  functions as leaves: every call on its hot path, and which ones are not the candidate's own.
kind "inductor": a subgraph problem compiled by TorchInductor on the GPU, its emitted code made a
  standalone kernel file (inductor_kernel.py); `library` "allow" or "deny" (cuBLAS/cuDNN).
kind "integrate": a kernel checked inside a whole model (integrate.py): every matching submodule
  replaced, the model's output verified, the model timed before and after.
kind "merge": several kernel sources joined into one module (source_merge.py; parse only).

The op's handler runs in the worker; the work runs in a child forked like the other children, so
a problem or candidate that crashes or hangs takes only that child with it.
"""
import contextlib
import copy
import math
import operator
import os
import time

from . import child_common, compare, inductor_kernel, inputs, integrate, loader, sandbox, source_merge
from .request import BadRequest

KINDS = ("problem", "forward", "merge", "inductor", "integrate")

# labels -> category, for the router's features (agents/roles/router.lua reads categories)
_CATEGORIES = [
    ("attention", {"scaled_dot_product_attention", "MultiheadAttention"}),
    ("conv_transpose", {"ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "conv_transpose1d",
                        "conv_transpose2d", "conv_transpose3d"}),
    ("conv", {"Conv1d", "Conv2d", "Conv3d", "conv1d", "conv2d", "conv3d"}),
    ("gemm", {"Linear", "linear", "matmul", "mm", "bmm", "addmm", "baddbmm", "einsum", "matmul_op",
              "bilinear", "Bilinear", "tensordot"}),
    ("norm", {"BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LayerNorm", "GroupNorm", "InstanceNorm1d",
              "InstanceNorm2d", "InstanceNorm3d", "batch_norm", "layer_norm", "group_norm",
              "instance_norm", "normalize", "rms_norm", "RMSNorm", "local_response_norm"}),
    ("softmax", {"softmax", "log_softmax", "Softmax", "LogSoftmax", "softmin"}),
    ("pool", {"MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d",
              "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool2d",
              "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
              "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d"}),
    ("reduction", {"sum", "mean", "max", "min", "amax", "amin", "var", "std", "prod", "logsumexp",
                   "norm", "argmax", "argmin", "cumsum", "cumprod", "var_mean", "std_mean", "all", "any"}),
    ("activation", {"relu", "gelu", "silu", "sigmoid", "tanh", "mish", "hardswish", "hardsigmoid",
                    "leaky_relu", "elu", "selu", "celu", "hardtanh", "softplus", "softsign", "relu6",
                    "prelu", "ReLU", "GELU", "SiLU", "Sigmoid", "Tanh", "Mish", "Hardswish",
                    "Hardsigmoid", "LeakyReLU", "ELU", "SELU", "CELU", "Hardtanh", "Softplus",
                    "Softsign", "ReLU6", "PReLU", "threshold", "Threshold", "logsigmoid",
                    "LogSigmoid", "tanhshrink", "Tanhshrink", "glu", "GLU"}),
    ("view", {"view", "reshape", "flatten", "Flatten", "permute", "transpose", "t", "contiguous",
              "unsqueeze", "squeeze", "expand", "expand_as", "getitem", "split", "chunk", "narrow",
              "unflatten", "Unflatten", "view_as", "reshape_as", "Identity", "clone", "movedim",
              "unbind", "select", "repeat", "cat", "stack", "to", "type_as", "float", "half",
              "bfloat16", "Dropout", "dropout", "Dropout1d", "Dropout2d", "Dropout3d"}),
]
_CATEGORY = {label: cat for cat, labels in _CATEGORIES for label in labels}

_INFIX = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/",
          operator.floordiv: "//", operator.mod: "%", operator.pow: "**", operator.matmul: "@",
          operator.eq: "==", operator.ne: "!=", operator.lt: "<", operator.le: "<=",
          operator.gt: ">", operator.ge: ">=", operator.and_: "&", operator.or_: "|",
          operator.xor: "^", operator.lshift: "<<", operator.rshift: ">>"}
_INFIX_LABEL = {operator.add: "add", operator.sub: "sub", operator.mul: "mul",
                operator.truediv: "div", operator.floordiv: "floordiv", operator.mod: "mod",
                operator.pow: "pow", operator.matmul: "matmul"}
# calls whose Python result depends only on tensor metadata (shapes are fixed: safe to fold)
_META_METHODS = {"size", "dim", "numel", "stride", "nelement", "ndimension", "element_size",
                 "is_contiguous", "get_device"}
_META_ATTRS = {"shape", "ndim", "dtype", "is_cuda", "device"}


class Unsupported(Exception):
    """An op that has no functional form here: the graph cannot be decomposed."""


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
            for key in ("kernel", "kernel_problem"):
                if not isinstance(job.get(key), str) or not os.path.isfile(job[key]):
                    raise BadRequest("%s must be the path of a file: %r" % (key, job.get(key)))
                with open(job[key]) as f:  # read here: the sandboxed child sees only the problem
                    spec[key] = f.read()
            if not (isinstance(job.get("match_class"), str) or isinstance(job.get("match_path"), str)):
                raise BadRequest("match_class or match_path is required")
            spec["match_class"], spec["match_path"] = job.get("match_class"), job.get("match_path")
            spec["reps"] = max(3, int(job.get("reps", 20)))
            spec["rounds"] = max(1, int(job.get("rounds", 3)))
        if kind == "inductor":
            if job.get("library", "allow") not in ("allow", "deny"):
                raise BadRequest("library must be allow or deny")
            spec["library"] = job.get("library", "allow")
    timeouts = {}
    if job.get("timeout"):
        timeouts = {k: float(job["timeout"]) for k in ("load", "trace", "run", "check", "time")}
    # the traced forward runs on the GPU and nothing of it is timed; integrate times a model
    with (ev.lease.timed() if kind == "integrate" else ev.lease.shared()):
        out = sandbox.run_child(_child, (spec,), timeouts, ev.close_fds)
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
        result = analyze_problem(torch, ch, spec)
    elif spec["kind"] == "integrate":
        result = integrate.run(torch, ch, spec, _shrink)
    elif spec["kind"] == "inductor":
        result = inductor_kernel.make(torch, ch, spec)
    else:
        result = trace_forward(torch, ch, spec)
    ch.send({"type": "analysis", "result": result})


# ---- kind "problem" ------------------------------------------------------------------------------

def analyze_problem(torch, ch, spec):
    device, dtype = spec["device"], loader.torch_dtype(torch, spec["dtype"])
    problem = loader.load_module("problem", spec["problem"])
    shrunk = _shrink(torch, problem, spec, dtype, device) if spec.get("shrink") else None
    init = list(problem.get_init_inputs())
    model = loader.build_model(torch, problem.Model, init, spec["seed"], dtype, device)
    args, _ = inputs.make_inputs(torch, problem, spec["seed"], 0, dtype, device, "own")
    params = {}
    for name, p in model.named_parameters():
        params[name] = dict(_describe(torch, p.detach()), kind="parameter")
    for name, b in model.named_buffers():
        params[name] = dict(_describe(torch, b), kind="buffer")
    result = {"ok": True, "traced": False, "decomposable": False, "unsupported": [],
              "params": params, "module_types": sorted({type(m).__name__ for m in model.modules()}),
              "param_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
              "param_count": sum(p.numel() for p in model.parameters()), "dtype": spec["dtype"]}
    if shrunk:
        result["shrunk"] = shrunk
    ch.stage("trace")
    _fx_unpack_compat(torch)
    try:
        # buffers are traced as values (torch 2's default; torch 1 read them as constants, so
        # `self.mask.sum()` became a tensor computed while tracing)
        tracer = torch.fx.Tracer()
        tracer.proxy_buffer_attributes = True
        with _constants_on_traced_devices(torch):
            graph = tracer.trace(model)
        gm = torch.fx.GraphModule(tracer.root, graph, type(model).__name__)
    except Exception as e:  # data-dependent control flow, untraceable calls
        text = "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:300] if str(e) else "")
        result["trace_error"] = text
        result["control_flow"] = "control flow" in text
        return result
    result["traced"] = True
    # an in-place op is written out of place below, which is the same only when nothing else
    # reads the value it writes; found before dead code goes (an in-place op's own result is
    # often unused)
    conflicts = [{"node": n.name, "reason": "in-place `%s` writes a value that other ops read" % _target_label(n)}
                 for n in gm.graph.nodes if _writes_read_value(torch, gm, n)]
    gm.graph.eliminate_dead_code()
    gm.recompile()
    ch.stage("run")
    with torch.no_grad():
        expected = model(*args)
        rec = _Recorder(torch, gm)
        traced_out = rec.run(*args)
    child_common.sync(torch, device)
    rtol, atol = compare.tolerances(spec["dtype"])
    fidelity = _same_outputs(torch, expected, traced_out, rtol, atol)
    state = dict(model.named_parameters())
    state.update(dict(model.named_buffers()))
    graph = _Graph(torch, gm, rec.meta, set(state))
    result.update(graph.describe())
    unsupported = conflicts + list(graph.unsupported)
    if fidelity is not True:
        unsupported.append({"node": None, "reason": "the traced graph does not reproduce the model: %s"
                            % fidelity})
    if not unsupported:
        ch.stage("check")
        check = _functional_check(torch, graph, model, args, traced_out, rtol, atol)
        result["functional_check"] = check
        if check is not True:
            unsupported.append({"node": None, "reason": "the functional form does not reproduce the "
                                "model: %s" % check})
    result["unsupported"] = unsupported
    result["decomposable"] = not unsupported
    return result


# the smaller settings tried, in order: batch-like constants to 2, every other extent to 16, then
# 32, then only the batch (a model whose layers fix an extent, as a Linear after a flatten does,
# runs only at its own); each first with every extent, then leaving those equal to a constructor
# argument as they are
_SHRINK_STEPS = ((2, 16), (2, 32), (2, None))


def _shrink(torch, problem, spec, dtype, device):
    """Lowers the problem's size constants to the first setting of _SHRINK_STEPS at which the
    model builds and runs; {name: [from, to]}, or None (then nothing changed)."""
    sizes = inputs.size_constants(problem)
    try:  # an extent equal to a constructor argument (channels = embed_dim) may have to stay
        init_values = {v for v in problem.get_init_inputs() if isinstance(v, int) and not isinstance(v, bool)}
    except Exception:
        init_values = set()
    tried = []
    for (batch, other), keep in [(step, keep) for step in _SHRINK_STEPS for keep in (False, True)]:
        new = {}
        for name, value in sizes.items():
            cap = batch if "batch" in name.lower() else other
            if keep and value in init_values and "batch" not in name.lower():
                continue
            if cap is not None and value > cap:
                new[name] = cap
        if not new or new in tried:
            continue
        tried.append(new)
        for name, value in new.items():
            setattr(problem, name, value)
        try:
            init = list(problem.get_init_inputs())
            model = loader.build_model(torch, problem.Model, init, spec["seed"], dtype, device)
            args, _ = inputs.make_inputs(torch, problem, spec["seed"], 0, dtype, device, "own")
            with torch.no_grad():
                model(*args)
            return {name: [sizes[name], value] for name, value in new.items()}
        except Exception:  # the model does not run at these sizes: try larger ones
            for name in new:
                setattr(problem, name, sizes[name])
    return None


@contextlib.contextmanager
def _constants_on_traced_devices(torch):
    """`torch.tensor(0.0, device=x.device)` cannot be traced (the device is a proxy): while
    tracing, such a constant is made without the proxied device or dtype, a small CPU tensor the
    graph keeps as a constant (a 0-d CPU tensor combines with a tensor on any device)."""
    real = torch.tensor

    def tensor(data, *args, **kwargs):
        for key in ("device", "dtype"):
            if isinstance(kwargs.get(key), torch.fx.Proxy):
                kwargs.pop(key)
        return real(data, *args, **kwargs)

    torch.tensor = tensor
    try:
        yield
    finally:
        torch.tensor = real


def _fx_unpack_compat(torch):
    """torch.fx before 2.0 finds the instruction that unpacks a proxy (`b, c, h, w = x.shape`) by
    f_lasti // 2 among dis's instructions, which Python 3.11's inline caches put off (an
    IndexError): on that pairing the instruction is looked up by its offset, as later torch does."""
    import dis
    import inspect
    import sys
    proxy = torch.fx.proxy.Proxy
    if sys.version_info < (3, 11) or int(torch.__version__.split(".")[0]) >= 2 or getattr(proxy, "_kagent_compat", False):
        return

    def __iter__(self):
        calling_frame = inspect.currentframe().f_back
        for inst in dis.get_instructions(calling_frame.f_code):
            if inst.offset == calling_frame.f_lasti:
                if inst.opname == "UNPACK_SEQUENCE":
                    return (self[i] for i in range(inst.argval))
                break
        return self.tracer.iter(self)

    proxy.__iter__ = __iter__
    proxy._kagent_compat = True


class _Recorder:
    """Runs the traced module node by node (torch.fx.Interpreter) and keeps a description of
    every value: shape, dtype and spread for tensors, the value itself for small Python ones."""

    def __init__(self, torch, gm):
        self.meta = {}
        outer = self

        class Interp(torch.fx.Interpreter):
            def run_node(self, n):
                value = super().run_node(n)
                outer.meta[n.name] = _describe(torch, value)
                return value

        self.interp = Interp(gm)

    def run(self, *args):
        return self.interp.run(*args)


def _describe(torch, value):
    if isinstance(value, torch.Tensor):
        d = {"tensor": True, "shape": list(value.shape), "dtype": str(value.dtype).replace("torch.", "")}
        if value.numel() == 0:
            return d
        if value.is_floating_point():
            v = value.detach().float()
            d["mean"] = _finite(v.mean().item())
            d["std"] = _finite(v.std().item()) if v.numel() > 1 else 0.0
        elif value.dtype != torch.bool:
            d["min"], d["max"] = int(value.min().item()), int(value.max().item())
        return d
    if isinstance(value, (tuple, list)) and value and all(isinstance(v, torch.Tensor) for v in value):
        return {"tensor": False, "tuple": True, "items": [_describe(torch, v) for v in value]}
    try:
        return {"tensor": False, "value": literal(torch, value), "literal": True}
    except Unsupported:
        return {"tensor": False, "literal": False, "type": type(value).__name__}


def _finite(x):
    return x if math.isfinite(x) else 0.0


def literal(torch, v):
    """Python source for a constant argument; raises Unsupported for what has none."""
    if v is None or isinstance(v, (bool, int, str)) or v is Ellipsis:
        return "..." if v is Ellipsis else repr(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "float('nan')"
        if math.isinf(v):
            return "float('inf')" if v > 0 else "float('-inf')"
        return repr(v)
    if isinstance(v, torch.dtype) or isinstance(v, torch.memory_format) or isinstance(v, torch.layout):
        return str(v)
    if isinstance(v, torch.Size):
        v = tuple(v)
    if isinstance(v, tuple):
        items = [literal(torch, x) for x in v]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if isinstance(v, list):
        return "[" + ", ".join(literal(torch, x) for x in v) + "]"
    if isinstance(v, slice):
        return "slice(%s, %s, %s)" % (literal(torch, v.start), literal(torch, v.stop), literal(torch, v.step))
    raise Unsupported("a constant of type %s has no source form" % type(v).__name__)


class _Graph:
    """The traced graph as the agents see it: values, ops with functional forms, the output."""

    def __init__(self, torch, gm, meta, state_names):
        self.torch, self.gm, self.meta = torch, gm, meta
        # the model's own parameters and buffers (the traced module also holds tensors that
        # tracing computed, which no state dict of the model has)
        self.named_params = state_names
        self.folded = {}      # node name -> literal source
        self.params_of = {}   # get_attr node name -> qualname
        self.unsupported = []
        self.inputs, self.ops, self.placeholders = [], [], []
        for n in gm.graph.nodes:
            m = meta.get(n.name, {})
            if n.op == "placeholder":
                self.placeholders.append({"name": n.name, "tensor": bool(m.get("tensor"))})
                if m.get("tensor"):
                    self.inputs.append(dict(name=n.name, **_value_meta(m)))
                elif m.get("literal"):
                    self.folded[n.name] = m["value"]
                else:
                    self._refuse(n, "graph input of type %s" % m.get("type"))
            elif n.op == "get_attr":
                const = _small_constant(torch, gm, n.target)
                if n.target in self.named_params:
                    self.params_of[n.name] = n.target
                elif const is not None:
                    # torch.tensor(2.0) in a forward is traced into a constant of the module:
                    # a few numbers are written out where they are used
                    self.folded[n.name] = const
                else:
                    self._refuse(n, "tensor `%s` is neither a parameter nor a buffer of the model "
                                 "(a constant, or computed from one while tracing)" % n.target)
            elif n.op in ("call_module", "call_function", "call_method"):
                self._op(n, m)
            elif n.op == "output":
                try:
                    self.output_expr = self._render(n.args[0])
                    self.outputs = [a.name for a in _nodes_in(n.args[0]) if a.name not in self.folded]
                except Unsupported as e:
                    self._refuse(n, str(e))
                    self.output_expr, self.outputs = "None", []

    def _refuse(self, n, reason):
        self.unsupported.append({"node": n.name, "reason": reason})

    def _op(self, n, m):
        # a Python (non-tensor) result: folded when it only reads shapes
        if not m.get("tensor") and not m.get("tuple"):
            if self._metadata_only(n) and m.get("literal"):
                self.folded[n.name] = m["value"]
            else:
                self._refuse(n, "its Python value depends on tensor data (%s)" % _target_label(n))
            return
        try:
            op = self._form(n)
        except Unsupported as e:
            self._refuse(n, str(e))
            return
        op["name"] = n.name
        if m.get("tensor"):
            op.update(_value_meta(m))
            op["tensor"] = True
        else:
            op["tensor"] = False
            op["items"] = [_value_meta(x) for x in m.get("items", [])]
        op["category"] = _CATEGORY.get(op["op"], "elementwise" if op["op"] in _ELEMENTWISE else "other")
        refs = []
        for a in _nodes_in((n.args, n.kwargs)):
            if a.name not in self.folded and a.name not in self.params_of and a.name not in refs:
                refs.append(a.name)
        op["inputs"] = refs
        self.ops.append(op)

    def _metadata_only(self, n):
        if n.op == "call_method" and n.target in _META_METHODS:
            return True
        if n.op == "call_function" and n.target is getattr and len(n.args) > 1 and n.args[1] in _META_ATTRS:
            return True
        if n.op == "call_function" and n.target is len:
            return True
        return all(a.name in self.folded for a in _nodes_in((n.args, n.kwargs)))

    def _render(self, a):
        """Source of an argument: ${v:..} for values, ${p:..} for parameters, literals."""
        torch = self.torch
        if isinstance(a, torch.fx.Node):
            if a.name in self.folded:
                return self.folded[a.name]
            if a.name in self.params_of:
                return "${p:%s}" % self.params_of[a.name]
            return "${v:%s}" % a.name
        if isinstance(a, tuple):
            items = [self._render(x) for x in a]
            return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
        if isinstance(a, list):
            return "[" + ", ".join(self._render(x) for x in a) + "]"
        if isinstance(a, dict):
            return "{" + ", ".join("%r: %s" % (k, self._render(v)) for k, v in a.items()) + "}"
        if isinstance(a, slice):
            return "slice(%s, %s, %s)" % (self._render(a.start), self._render(a.stop), self._render(a.step))
        return literal(torch, a)

    def _call_args(self, args, kwargs):
        parts = [self._render(a) for a in args]
        parts += ["%s=%s" % (k, self._render(v)) for k, v in kwargs.items()]
        return ", ".join(parts)

    def _form(self, n):
        torch = self.torch
        if n.op == "call_module":
            mod = self.gm.get_submodule(n.target)
            label = type(mod).__name__
            if len(n.args) != 1 or n.kwargs:
                if any(True for _ in mod.parameters()) or any(True for _ in mod.buffers()):
                    raise Unsupported("layer `%s` (%s) is called with more than its input" % (n.target, label))
            x = self._render(n.args[0]) if n.args else ""
            expr, params = _module_form(torch, mod, n.target, x)
            if expr is not None:
                return {"op": label, "kind": "call_module", "target": n.target, "expr": expr,
                        "params": params}
            ctor = _module_ctor(torch, mod)
            return {"op": label, "kind": "call_module", "target": n.target,
                    "expr": "${m}(%s)" % self._call_args(n.args, n.kwargs), "params": [],
                    "module_ctor": ctor}
        if n.op == "call_method":
            method = n.target
            if _inplace_method(torch, method):
                method = method[:-1]
            expr = "%s.%s(%s)" % (self._render(n.args[0]), method, self._call_args(n.args[1:], n.kwargs))
            return {"op": method, "kind": "call_method", "target": n.target, "expr": expr,
                    "params": self._params_in(n)}
        fn = n.target
        kwargs = dict(n.kwargs)
        if kwargs.get("inplace") is True:
            kwargs["inplace"] = False
        if fn in _INFIX and len(n.args) == 2 and not kwargs:
            expr = "(%s %s %s)" % (self._render(n.args[0]), _INFIX[fn], self._render(n.args[1]))
            label = _INFIX_LABEL.get(fn, fn.__name__.strip("_"))
        elif fn is operator.neg:
            expr, label = "(-%s)" % self._render(n.args[0]), "neg"
        elif fn is operator.getitem:
            expr, label = "%s[%s]" % (self._render(n.args[0]), self._render(n.args[1])), "getitem"
        else:
            name = _function_name(torch, fn)
            expr = "%s(%s)" % (name, self._call_args(n.args, kwargs))
            label = name.split(".")[-1]
        if label in ("dropout", "rand", "randn", "rand_like", "randn_like", "bernoulli", "multinomial"):
            if label != "dropout" or _dropout_active(n, kwargs):
                raise Unsupported("`%s` is random" % label)
        return {"op": label, "kind": "call_function", "target": label, "expr": expr,
                "params": self._params_in(n)}

    def _params_in(self, n):
        out = []
        for a in _nodes_in((n.args, n.kwargs)):
            q = self.params_of.get(a.name)
            if q and q not in out:
                out.append(q)
        return out

    def describe(self):
        used = []
        for op in self.ops:
            for q in op["params"]:
                if q not in used:
                    used.append(q)
        return {"inputs": self.inputs, "placeholders": self.placeholders, "ops": self.ops,
                "outputs": getattr(self, "outputs", []),
                "output_expr": getattr(self, "output_expr", "None"), "used_params": used,
                "folded": sorted(self.folded)}


_ELEMENTWISE = {"add", "sub", "mul", "div", "floordiv", "mod", "pow", "neg", "exp", "log", "sqrt",
                "rsqrt", "abs", "clamp", "clip", "where", "maximum", "minimum", "reciprocal", "sign",
                "sin", "cos", "erf", "exp2", "log2", "log1p", "expm1", "square", "lerp", "addcmul",
                "addcdiv", "masked_fill", "floor", "ceil", "round", "trunc", "fmod", "remainder",
                "lt", "le", "gt", "ge", "eq", "ne", "logical_and", "logical_or", "logical_not",
                "bitwise_and", "bitwise_or", "sigmoid_", "hypot", "atan2", "clamp_min", "clamp_max"}


def _inplace_method(torch, name):
    return name.endswith("_") and not name.endswith("__") and hasattr(torch.Tensor, name[:-1])


def _writes_read_value(torch, gm, n):
    """An in-place op (x.add_(..), F.relu(.., inplace=True), nn.ReLU(inplace=True)) whose
    target value other ops read too."""
    if n.op == "call_method":
        inplace = _inplace_method(torch, n.target)
    elif n.op == "call_function":
        inplace = n.kwargs.get("inplace") is True
    elif n.op == "call_module":
        inplace = getattr(gm.get_submodule(n.target), "inplace", False) is True
    else:
        return False
    target = n.args[0] if n.args else None
    return inplace and isinstance(target, torch.fx.Node) and len(target.users) > 1


def _dropout_active(n, kwargs):
    p = kwargs.get("p", n.args[1] if len(n.args) > 1 else 0.5)
    training = kwargs.get("training", n.args[2] if len(n.args) > 2 else True)
    return bool(training) and p not in (0, 0.0)


def _nodes_in(arg):
    import torch.fx
    found = []
    torch.fx.node.map_arg(arg, lambda a: found.append(a))
    return found


def _small_constant(torch, gm, target):
    """Source that rebuilds a tensor constant of the traced module with at most 16 elements
    (`torch.tensor(...)`, on the CPU: a 0-d one combines with tensors on any device), or None."""
    t = gm
    for part in target.split("."):
        t = getattr(t, part, None)
    if not isinstance(t, torch.Tensor) or t.numel() > 16 or t.requires_grad:
        return None
    return "torch.tensor(%r, dtype=%s)" % (t.tolist(), t.dtype)


def _value_meta(m):
    out = {"shape": m.get("shape"), "dtype": m.get("dtype")}
    for k in ("mean", "std", "min", "max"):
        if k in m:
            out[k] = m[k]
    return out


def _target_label(n):
    t = n.target
    return t if isinstance(t, str) else getattr(t, "__name__", str(t))


def _function_name(torch, fn):
    """A name that evaluates to fn in a module that imported torch, operator and math."""
    name = getattr(fn, "__name__", None)
    if name:
        for prefix, space in (("torch.nn.functional", torch.nn.functional), ("torch", torch),
                              ("operator", operator), ("math", math)):
            if getattr(space, name, None) is fn:
                return prefix + "." + name
        if fn in (getattr, len, abs, max, min, int, float):
            return name
    from torch.fx.node import _get_qualified_name
    try:
        qual = _get_qualified_name(fn)
    except Exception:
        qual = None
    if qual and _resolve(torch, qual) is fn:
        return qual
    raise Unsupported("function %s cannot be named in a standalone problem" % (name or fn))


def _resolve(torch, qual):
    try:
        return eval(qual, {"torch": torch, "operator": operator, "math": math})
    except Exception:
        return None


def _module_form(torch, m, target, x):
    """(expr, params) of a layer with parameters or buffers as a torch.nn.functional call with
    its tensors passed in; (None, None) for a parameter-free layer; Unsupported otherwise."""
    nn = torch.nn
    used = []

    def p(name, optional=False):
        if getattr(m, name, None) is None:
            if optional:
                return "None"
            raise Unsupported("layer `%s` has no %s" % (target, name))
        q = "%s.%s" % (target, name) if target else name
        used.append(q)
        return "${p:%s}" % q

    F = "torch.nn.functional."
    if isinstance(m, nn.Linear):
        return F + "linear(%s, %s, %s)" % (x, p("weight"), p("bias", True)), used
    for nd, conv, convt in ((1, nn.Conv1d, nn.ConvTranspose1d), (2, nn.Conv2d, nn.ConvTranspose2d),
                            (3, nn.Conv3d, nn.ConvTranspose3d)):
        if isinstance(m, convt):
            return F + "conv_transpose%dd(%s, %s, %s, %r, %r, %r, %d, %r)" % (
                nd, x, p("weight"), p("bias", True), tuple(m.stride), tuple(m.padding),
                tuple(m.output_padding), m.groups, tuple(m.dilation)), used
        if isinstance(m, conv):
            if m.padding_mode != "zeros":
                raise Unsupported("layer `%s` pads with %r" % (target, m.padding_mode))
            pad = m.padding if isinstance(m.padding, str) else tuple(m.padding)
            return F + "conv%dd(%s, %s, %s, %r, %r, %r, %d)" % (
                nd, x, p("weight"), p("bias", True), tuple(m.stride), pad, tuple(m.dilation),
                m.groups), used
    norm_base = getattr(nn.modules.batchnorm, "_BatchNorm", None)
    if norm_base is not None and isinstance(m, norm_base) and type(m).__name__.startswith("BatchNorm"):
        if m.training or not m.track_running_stats or m.running_mean is None:
            return F + "batch_norm(%s, None, None, %s, %s, True, 0.0, %r)" % (
                x, p("weight", True), p("bias", True), m.eps), used
        return F + "batch_norm(%s, %s, %s, %s, %s, False, 0.0, %r)" % (
            x, p("running_mean"), p("running_var"), p("weight", True), p("bias", True), m.eps), used
    inorm = getattr(nn.modules.instancenorm, "_InstanceNorm", None)
    if inorm is not None and isinstance(m, inorm):
        if m.training or not m.track_running_stats or m.running_mean is None:
            return F + "instance_norm(%s, None, None, %s, %s, True, 0.0, %r)" % (
                x, p("weight", True), p("bias", True), m.eps), used
        return F + "instance_norm(%s, %s, %s, %s, %s, False, 0.0, %r)" % (
            x, p("running_mean"), p("running_var"), p("weight", True), p("bias", True), m.eps), used
    if isinstance(m, nn.LayerNorm):
        return F + "layer_norm(%s, %r, %s, %s, %r)" % (
            x, tuple(m.normalized_shape), p("weight", True), p("bias", True), m.eps), used
    if isinstance(m, nn.GroupNorm):
        return F + "group_norm(%s, %d, %s, %s, %r)" % (x, m.num_groups, p("weight", True),
                                                      p("bias", True), m.eps), used
    if type(m).__name__ == "RMSNorm" and hasattr(torch.nn.functional, "rms_norm"):
        return F + "rms_norm(%s, %r, %s, %r)" % (x, tuple(m.normalized_shape), p("weight", True),
                                                 m.eps), used
    if isinstance(m, nn.PReLU):
        return F + "prelu(%s, %s)" % (x, p("weight")), used
    if isinstance(m, nn.Embedding) and m.max_norm is None:
        return F + "embedding(%s, %s, %r)" % (x, p("weight"), m.padding_idx), used
    if any(True for _ in m.parameters()) or any(True for _ in m.buffers()):
        raise Unsupported("layer `%s` (%s) has parameters and no functional form here" % (
            target, type(m).__name__))
    return None, None


def _module_ctor(torch, m):
    """Source that builds an equal parameter-free layer (checked by rebuilding it)."""
    cls = type(m)
    if not cls.__module__.startswith("torch.nn"):
        raise Unsupported("layer %s is not a torch.nn layer" % cls.__name__)
    if cls.__name__.startswith("Dropout") and m.training and getattr(m, "p", 0) not in (0, 0.0):
        raise Unsupported("`%s` is random in training mode" % cls.__name__)
    name = "torch.nn." + cls.__name__ if getattr(torch.nn, cls.__name__, None) is cls else \
        cls.__module__ + "." + cls.__name__
    if getattr(m, "inplace", False) is True:
        # the functional form is out of place: the layer to rebuild is its out-of-place twin
        # (whose repr leaves `inplace` out: ReLU(inplace=True) becomes ReLU())
        m = copy.copy(m)
        m.inplace = False
    ctor = "%s(%s)" % (name, m.extra_repr())
    try:
        built = eval(ctor, {"torch": torch})
    except Exception as e:
        raise Unsupported("layer %s cannot be rebuilt from %r (%s)" % (cls.__name__, ctor, e))
    if repr(built) != repr(m):
        raise Unsupported("layer %s is not rebuilt exactly by %r" % (cls.__name__, ctor))
    return ctor + ("" if m.training else ".eval()")


def functional_source(graph_inputs, ops, output_expr, name="_functional"):
    """Python source of the whole graph in functional form (what the self-check runs)."""
    import re
    lines = ["def %s(__p, __m, %s):" % (name, ", ".join("v_" + i["name"] for i in graph_inputs))]

    def sub(expr, node):
        expr = re.sub(r"\$\{v:([^}]+)\}", lambda mt: "v_" + mt.group(1), expr)
        expr = re.sub(r"\$\{p:([^}]+)\}", lambda mt: "__p[%r]" % mt.group(1), expr)
        return expr.replace("${m}", "__m[%r]" % node)

    for op in ops:
        lines.append("    v_%s = %s" % (op["name"], sub(op["expr"], op["name"])))
    lines.append("    return %s" % sub(output_expr, None))
    return "\n".join(lines) + "\n"


def _functional_check(torch, graph, model, args, expected, rtol, atol):
    desc = graph.describe()
    src = functional_source(graph.inputs, desc["ops"], desc["output_expr"])
    ns = {"torch": torch, "operator": operator, "math": math}
    try:
        exec(compile(src, "<functional form>", "exec"), ns)
        mods = {op["name"]: eval(op["module_ctor"], {"torch": torch})
                for op in desc["ops"] if op.get("module_ctor")}
        params = dict(model.named_parameters())
        params.update(dict(model.named_buffers()))
        tensor_args = [a for a, p in zip(args, graph.placeholders) if p["tensor"]]
        with torch.no_grad():
            got = ns["_functional"](params, mods, *tensor_args)
    except Exception as e:
        return "%s: %s" % (type(e).__name__, str(e)[:300])
    return _same_outputs(torch, expected, got, rtol, atol)


def _flatten(torch, v):
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, (tuple, list)):
        return [t for x in v for t in _flatten(torch, x)]
    return [v]


def _same_outputs(torch, a, b, rtol, atol):
    """True, or the first difference as text."""
    fa, fb = _flatten(torch, a), _flatten(torch, b)
    if len(fa) != len(fb):
        return "%d outputs instead of %d" % (len(fb), len(fa))
    for i, (x, y) in enumerate(zip(fa, fb)):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return "output %d: tensor and non-tensor" % i
        if not isinstance(x, torch.Tensor):
            if x != y:
                return "output %d: %r instead of %r" % (i, y, x)
            continue
        if x.shape != y.shape:
            return "output %d: shape %s instead of %s" % (i, list(y.shape), list(x.shape))
        xf, yf = x.detach().float(), y.detach().float()
        if not torch.allclose(xf, yf, rtol=rtol, atol=atol, equal_nan=True):
            return "output %d differs by up to %.3g" % (i, (xf - yf).abs().max().item())
    return True


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
