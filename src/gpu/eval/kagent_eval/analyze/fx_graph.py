"""The traced graph of a problem as the agents see it (analyze_problem.py): its inputs, its ops in
functional form (fx_forms.py) and its output expression."""
import operator

from . import fx_module_calls
from .fx_forms import (CATEGORY, ELEMENTWISE, INFIX, INFIX_LABEL, META_ATTRS, META_METHODS,
                       Unsupported, dropout_active, function_name, inplace_method, literal,
                       module_ctor, module_form, nodes_in, small_constant, target_label,
                       value_meta, VIEW_ATTRS)

class Graph:
    """The traced graph as the agents see it: values, ops with functional forms, the output."""

    def __init__(self, torch, gm, meta, state_names, numbers_on_device=False):
        """numbers_on_device: the forward made a constant on its input's device, which the trace
        made on the CPU (analyze_problem._constants_on_traced_devices): 0-d constants go on
        their op's device too."""
        self.torch, self.gm, self.meta = torch, gm, meta
        # the model's own parameters and buffers (the traced module also holds tensors that
        # tracing computed, which no state dict of the model has)
        self.named_params = state_names
        self.folded = {}      # node name -> literal source
        self.params_of = {}   # get_attr node name -> qualname
        self.unsupported = []
        self._tensor_in = None  # the tensor input of the op being written (_form)
        self.on_device = set()  # folded constants made on their op's device
        self._device_from = None  # the input an op without tensor inputs takes its device from
        self._first_input = next((n for n in gm.graph.nodes if n.op == "placeholder"
                                  and meta.get(n.name, {}).get("tensor")), None)
        self.inputs, self.ops, self.placeholders = [], [], []
        for n in gm.graph.nodes:
            m = meta.get(n.name, {})
            if n.op == "placeholder":
                self.placeholders.append({"name": n.name, "tensor": bool(m.get("tensor"))})
                if m.get("tensor"):
                    self.inputs.append(dict(name=n.name, **value_meta(m)))
                elif m.get("literal"):
                    self.folded[n.name] = m["value"]
                else:
                    self._refuse(n, "graph input of type %s" % m.get("type"))
            elif n.op == "get_attr":
                const = small_constant(torch, gm, n.target)
                if n.target in self.named_params:
                    self.params_of[n.name] = n.target
                elif const is not None:
                    # torch.tensor(2.0) in a forward is traced into a constant of the module:
                    # a few numbers are written out where they are used
                    self.folded[n.name] = const
                    if meta.get(n.name, {}).get("shape") or numbers_on_device:
                        self.on_device.add(n.name)
                else:
                    self._refuse(n, "tensor `%s` is neither a parameter nor a buffer of the model "
                                 "(a constant, or computed from one while tracing)" % n.target)
            elif n.op in ("call_module", "call_function", "call_method"):
                self._op(n, m)
            elif n.op == "output":
                self._tensor_in = None
                try:
                    self.output_expr = self._render(n.args[0])
                    self.outputs = [a.name for a in nodes_in(n.args[0]) if a.name not in self.folded]
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
                self._refuse(n, "its Python value depends on tensor data (%s)" % target_label(n))
            return
        try:
            op = self._form(n)
        except Unsupported as e:
            self._refuse(n, str(e))
            return
        op["name"] = n.name
        if m.get("tensor"):
            op.update(value_meta(m))
            op["tensor"] = True
        else:
            op["tensor"] = False
            op["items"] = [value_meta(x) for x in m.get("items", [])]
        op["category"] = CATEGORY.get(op["op"], "elementwise" if op["op"] in ELEMENTWISE else "other")
        if n.op == "call_function" and n.target is getattr and len(n.args) > 1 and n.args[1] in VIEW_ATTRS:
            op["category"] = "view"
        refs = [self._device_from.name] if self._device_from is not None else []
        for a in nodes_in((n.args, n.kwargs)):
            if a.name not in self.folded and a.name not in self.params_of and a.name not in refs:
                refs.append(a.name)
        op["inputs"] = refs
        self.ops.append(op)

    def _metadata_only(self, n):
        if n.op == "call_method" and n.target in META_METHODS:
            return True
        if n.op == "call_function" and n.target is getattr and len(n.args) > 1 and n.args[1] in META_ATTRS:
            return True
        if n.op == "call_function" and n.target is len:
            return True
        return all(a.name in self.folded for a in nodes_in((n.args, n.kwargs)))

    def _render(self, a):
        """Source of an argument: ${v:..} for values, ${p:..} for parameters, literals."""
        torch = self.torch
        if isinstance(a, torch.fx.Node):
            if a.name in self.on_device and self._tensor_in is not None:
                # a constant of more than one number (`torch.zeros(b, 6, device=x.device)` the
                # concrete trace ran) is made on the op's input's device: only a 0-d CPU tensor
                # combines with tensors on another device, and only in arithmetic
                return "%s.to(%s.device)" % (self.folded[a.name], self._render(self._tensor_in))
            if a.name in self.folded:
                return self.folded[a.name]
            if a.name in self.params_of:
                return "${p:%s}" % self.params_of[a.name]
            return "${v:%s}" % a.name
        if isinstance(a, torch.device) and self._tensor_in is not None:
            # a device the concrete trace read (`h.to(x.device)`): every value of the traced run
            # is on one device, so it is written as the op's own input's, which holds wherever
            # the subgraph runs
            return "%s.device" % self._render(self._tensor_in)
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

    def _shape_of(self, a):
        if isinstance(a, self.torch.fx.Node) and self.meta.get(a.name, {}).get("tensor"):
            return self.meta[a.name]["shape"]
        return None

    def _call_args(self, args, kwargs):
        parts = [self._render(a) for a in args]
        parts += ["%s=%s" % (k, self._render(v)) for k, v in kwargs.items()]
        return ", ".join(parts)

    def _form(self, n):
        torch = self.torch
        self._tensor_in = next((a for a in nodes_in((n.args, n.kwargs)) if a.name not in self.folded
                                and (a.name in self.params_of or self.meta.get(a.name, {}).get("tensor"))), None)
        self._device_from = None
        if self._tensor_in is None and self._first_input is not None and any(
                isinstance(a, torch.device) for a in _leaves((n.args, n.kwargs))):
            # a tensor made from sizes on the device the model runs on (`torch.ones(T, T,
            # device=x.device)`): it takes the device of the model's first input, which it reads
            self._tensor_in = self._device_from = self._first_input
        if n.op == "call_module":
            mod = self.gm.get_submodule(n.target)
            label = type(mod).__name__
            if fx_module_calls.is_module_call(torch, mod):
                expr, label, params = fx_module_calls.form(
                    torch, mod, n.target, n.args, n.kwargs, self._render, self._shape_of)
                # the layer's own parameters, then those passed to it (an LSTM's state buffers)
                params += [q for q in self._params_in(n) if q not in params]
                return {"op": label, "kind": "call_module", "target": n.target, "expr": expr,
                        "params": params}
            if len(n.args) != 1 or n.kwargs:
                if any(True for _ in mod.parameters()) or any(True for _ in mod.buffers()):
                    raise Unsupported("layer `%s` (%s) is called with more than its input" % (n.target, label))
            x = self._render(n.args[0]) if n.args else ""
            expr, params = module_form(torch, mod, n.target, x)
            if expr is not None:
                # the layer's own parameters, then those passed to it (an LSTM's state buffers)
                params += [q for q in self._params_in(n) if q not in params]
                return {"op": label, "kind": "call_module", "target": n.target, "expr": expr,
                        "params": params}
            ctor = module_ctor(torch, mod)
            return {"op": label, "kind": "call_module", "target": n.target,
                    "expr": "${m}(%s)" % self._call_args(n.args, n.kwargs), "params": [],
                    "module_ctor": ctor}
        if n.op == "call_method":
            method = n.target
            if inplace_method(torch, method):
                method = method[:-1]
            expr = "%s.%s(%s)" % (self._render(n.args[0]), method, self._call_args(n.args[1:], n.kwargs))
            return {"op": method, "kind": "call_method", "target": n.target, "expr": expr,
                    "params": self._params_in(n)}
        fn = n.target
        kwargs = dict(n.kwargs)
        if kwargs.get("inplace") is True:
            kwargs["inplace"] = False
        if fn in INFIX and len(n.args) == 2 and not kwargs:
            expr = "(%s %s %s)" % (self._render(n.args[0]), INFIX[fn], self._render(n.args[1]))
            label = INFIX_LABEL.get(fn, fn.__name__.strip("_"))
        elif fn is operator.neg:
            expr, label = "(-%s)" % self._render(n.args[0]), "neg"
        elif fn is operator.getitem:
            expr, label = "%s[%s]" % (self._render(n.args[0]), self._render(n.args[1])), "getitem"
        else:
            name = function_name(torch, fn)
            expr = "%s(%s)" % (name, self._call_args(n.args, kwargs))
            label = name.split(".")[-1]
        if label in ("dropout", "rand", "randn", "rand_like", "randn_like", "bernoulli", "multinomial"):
            if label != "dropout" or dropout_active(n, kwargs):
                raise Unsupported("`%s` is random" % label)
        return {"op": label, "kind": "call_function", "target": label, "expr": expr,
                "params": self._params_in(n)}

    def _params_in(self, n):
        out = []
        for a in nodes_in((n.args, n.kwargs)):
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


def _leaves(arg):
    if isinstance(arg, (tuple, list)):
        return [x for a in arg for x in _leaves(a)]
    if isinstance(arg, dict):
        return [x for a in arg.values() for x in _leaves(a)]
    return [arg]
