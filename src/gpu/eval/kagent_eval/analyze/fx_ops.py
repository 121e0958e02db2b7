"""kind "ops" of the `analyze` op (analyze.py): the operations of a problem's Model, from its
torch.fx trace, each labelled and put in a category (fx_forms.CATEGORIES). The agents file what
they learn under the problem's class of operation, which they derive from these categories
(agents/lib/features.lua); reading the trace, not the source's words, a BatchNorm is a norm and
an einsum a product. The model is built but not run where torch.fx's own trace works; the
concrete trace (fx_trace.py, one forward) only where it does not."""
import operator

from . import fx_trace
from ..common import inputs, loader
from .fx_forms import CATEGORY, ELEMENTWISE, INFIX_LABEL, target_label


def label(gm, n):
    """The op's name as fx_forms.CATEGORIES writes it: a layer's class, a function's or a method's
    name; None for what is no operation (inputs, outputs, attributes)."""
    if n.op == "call_module":
        return type(gm.get_submodule(n.target)).__name__
    if n.op == "call_function":
        if n.target is operator.getitem:
            return "getitem"
        return INFIX_LABEL.get(n.target) or target_label(n)
    if n.op == "call_method":
        return n.target
    return None


def describe(gm):
    """{labels: sorted distinct op labels, categories: {category: number of ops}}"""
    labels, categories = set(), {}
    for n in gm.graph.nodes:
        name = label(gm, n)
        if name is None:
            continue
        labels.add(name)
        cat = CATEGORY.get(name, "elementwise" if name in ELEMENTWISE else "other")
        categories[cat] = categories.get(cat, 0) + 1
    return {"labels": sorted(labels), "categories": categories}


def analyze(torch, ch, spec):
    device, dtype = spec["device"], loader.torch_dtype(torch, spec["dtype"])
    problem = loader.load_module("problem", spec["problem"])
    model = loader.build_model(torch, problem.Model, list(problem.get_init_inputs()), spec["seed"], dtype, device)
    ch.stage("trace")
    fx_trace.unpack_compat(torch)
    text = None
    for mode in ("plain", "concrete"):
        try:
            if mode == "plain":
                gm = fx_trace.plain(torch, model)
            else:
                args, _ = inputs.make_inputs(torch, problem, spec["seed"], 0, dtype, device, "own")
                gm = fx_trace.concrete(torch, model, args)
            return dict(describe(gm), ok=True, traced=True, trace=mode)
        except Exception as e:  # data-dependent control flow, untraceable calls
            text = "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:300] if str(e) else "")
    return {"ok": True, "traced": False, "trace_error": text}
