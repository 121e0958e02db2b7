"""kind "problem" of the `analyze` op (analyze.py): the problem's Model traced with torch.fx, run
once to describe every value, and its functional form checked against the model."""
import contextlib
import math
import operator

from . import fx_trace
from ..child import child_common
from ..common import inputs, loader
from ..judge import compare
from .fx_forms import Unsupported, literal, target_label, writes_read_value
from .fx_graph import Graph

def analyze(torch, ch, spec):
    device, dtype = spec["device"], loader.torch_dtype(torch, spec["dtype"])
    problem = loader.load_module("problem", spec["problem"])
    shrunk = shrink(torch, problem, spec, dtype, device) if spec.get("shrink") else None
    init = list(problem.get_init_inputs())
    model = loader.build_model(torch, problem.Model, init, spec["seed"], dtype, device)
    args, _ = inputs.make_inputs(torch, problem, spec["seed"], 0, dtype, device, "own")
    params = {}
    for name, p in model.named_parameters():
        params[name] = dict(describe(torch, p.detach()), kind="parameter")
    for name, b in model.named_buffers():
        params[name] = dict(describe(torch, b), kind="buffer")
    result = {"ok": True, "traced": False, "decomposable": False, "unsupported": [],
              "params": params, "module_types": sorted({type(m).__name__ for m in model.modules()}),
              "param_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
              "param_count": sum(p.numel() for p in model.parameters()), "dtype": spec["dtype"]}
    if shrunk:
        result["shrunk"] = shrunk
    ch.stage("trace")
    fx_trace.unpack_compat(torch)
    # torch.fx's own trace first; where it cannot trace (branches on shapes, arguments left to
    # their defaults), the concrete trace (fx_trace.py)
    gm = None
    dropped = []  # set where the forward made a constant on a device of its choosing
    for mode in (("concrete",) if fx_trace.needs_concrete(model, args) else ("plain", "concrete")):
        try:
            with _constants_on_traced_devices(torch, dropped):
                gm = fx_trace.plain(torch, model) if mode == "plain" else fx_trace.concrete(torch, model, args)
            break
        except Exception as e:  # data-dependent control flow, untraceable calls
            text = "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:300] if str(e) else "")
    if gm is None:
        result["trace_error"] = text
        result["control_flow"] = "control flow" in text
        return result
    result["traced"], result["trace"] = True, mode
    # an in-place op is written out of place below, which is the same only when nothing else
    # reads the value it writes; found before dead code goes (an in-place op's own result is
    # often unused)
    conflicts = [{"node": n.name, "reason": "in-place `%s` writes a value that other ops read" % target_label(n)}
                 for n in gm.graph.nodes if writes_read_value(torch, gm, n)]
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
    graph = Graph(torch, gm, rec.meta, set(state), numbers_on_device=bool(dropped))
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
# runs only at its own); each first with every extent, then leaving one extent equal to a
# constructor argument as it is (channels = embed_dim, where the image side happens to equal it
# too), then all such extents
_SHRINK_STEPS = ((2, 16), (2, 32), (2, None))


def shrink(torch, problem, spec, dtype, device):
    """Lowers the problem's size constants to the first setting of _SHRINK_STEPS at which the
    model builds and runs; {name: [from, to]}, or None (then nothing changed)."""
    sizes = inputs.size_constants(problem)
    try:  # an extent equal to a constructor argument (channels = embed_dim) may have to stay
        init_values = {v for v in problem.get_init_inputs() if isinstance(v, int) and not isinstance(v, bool)}
    except Exception:
        init_values = set()
    tried = []
    tied = [name for name, value in sorted(sizes.items())
            if value in init_values and "batch" not in name.lower()]
    keeps = [set()] + [{name} for name in tied] + [set(tied)]
    for (batch, other), keep in [(step, keep) for step in _SHRINK_STEPS for keep in keeps]:
        new = {}
        for name, value in sizes.items():
            cap = batch if "batch" in name.lower() else other
            if name in keep:
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
def _constants_on_traced_devices(torch, dropped):
    """`torch.tensor(0.0, device=x.device)` cannot be traced (the device is a proxy): while
    tracing, such a constant is made without the proxied device or dtype, a small CPU tensor the
    graph keeps as a constant. The concrete trace (fx_trace.concrete) passes a real device, so
    its constant is made there, and written out as a CPU tensor all the same (fx_forms.
    small_constant). A 0-d CPU tensor combines with a tensor on any device in arithmetic, not
    everywhere (clamp's bound must be on its input's device): a constant made with a device the
    forward chose is noted in `dropped`, and the functional form then makes the graph's 0-d
    constants on their op's device, as the forward did (fx_graph.Graph's numbers_on_device)."""
    real = torch.tensor

    def tensor(data, *args, **kwargs):
        if kwargs.get("device") is not None:
            dropped.append(True)
        for key in ("device", "dtype"):
            if isinstance(kwargs.get(key), torch.fx.Proxy):
                kwargs.pop(key)
        return real(data, *args, **kwargs)

    torch.tensor = tensor
    try:
        yield
    finally:
        torch.tensor = real


class _Recorder:
    """Runs the traced module node by node (torch.fx.Interpreter) and keeps a description of
    every value: shape, dtype and spread for tensors, the value itself for small Python ones."""

    def __init__(self, torch, gm):
        self.meta = {}
        outer = self

        class Interp(torch.fx.Interpreter):
            def run_node(self, n):
                value = super().run_node(n)
                outer.meta[n.name] = describe(torch, value)
                return value

        self.interp = Interp(gm)

    def run(self, *args):
        return self.interp.run(*args)


def describe(torch, value):
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
    if isinstance(value, (tuple, list)) and value and _tensor_tree(torch, value):
        # a layer's tuple of results: (output, (h, c)) of an LSTM, (output, None) of an attention
        return {"tensor": False, "tuple": True, "items": [describe(torch, v) for v in value]}
    try:
        return {"tensor": False, "value": literal(torch, value), "literal": True}
    except Unsupported:
        return {"tensor": False, "literal": False, "type": type(value).__name__}


def _tensor_tree(torch, value):
    """True for a tuple or list of tensors, Nones and such tuples, with a tensor somewhere."""
    def leaves(v):
        if isinstance(v, (tuple, list)):
            return [x for item in v for x in leaves(item)]
        return [v]
    items = leaves(value)
    return any(isinstance(v, torch.Tensor) for v in items) and all(
        v is None or isinstance(v, torch.Tensor) for v in items)


def _finite(x):
    return x if math.isfinite(x) else 0.0


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
