"""Tracing a problem's Model with torch.fx (analyze_problem.py), in one of two ways.

The plain trace (torch.fx's own) sees every tensor as a proxy: a forward that branches or loops on
a shape (`for t in range(x.size(0))`, `if H % w:`), compares devices or asks `requires_grad` (as
torch.nn's Transformer layers do) cannot be traced. The concrete trace runs the forward on the real
inputs while it records it: each recorded op is also computed, and what only reads a tensor's
metadata (its shape, dtype, device, ...) is answered with the real value, which the graph keeps
as a constant. The shapes of a problem are fixed, so the graph is the model's at those shapes.
A branch on tensor *data* (`if x.sum() > 0`) is still refused: that value would differ on other
inputs. Arguments the problem's get_inputs leaves out take their defaults as plain values (a
forward's `h0=None` runs its `if h0 is None:` branch as the model does)."""
import contextlib
import sys

# tensor metadata the concrete trace answers with the real value (never data)
CONCRETE_ATTRS = {"shape", "ndim", "dtype", "device", "is_cuda", "requires_grad", "is_nested",
                  "is_sparse", "is_quantized", "is_meta", "layout", "is_mkldnn"}
CONCRETE_METHODS = {"size", "dim", "numel", "nelement", "ndimension", "element_size",
                    "is_contiguous", "get_device", "is_floating_point", "is_complex", "stride"}

# torch functions that make a tensor from sizes, recorded as calls by the concrete trace
FACTORIES = ("ones", "zeros", "full", "arange", "eye", "linspace", "rand", "randn", "randint")

# torch.nn layers traced through rather than kept whole: their forwards are plain ops around a
# MultiheadAttention (which has a functional form, fx_module_calls.py)
TRACED_THROUGH = ("TransformerEncoder", "TransformerEncoderLayer", "TransformerDecoder",
                  "TransformerDecoderLayer", "Transformer")


def _tracer_base(torch):
    class Tracer(torch.fx.Tracer):
        def __init__(self):
            super().__init__()
            # buffers are traced as values (torch 2's default; torch 1 read them as constants,
            # so `self.mask.sum()` became a tensor computed while tracing)
            self.proxy_buffer_attributes = True

        def is_leaf_module(self, m, qualname):
            if type(m).__name__ in TRACED_THROUGH and type(m).__module__.startswith("torch.nn"):
                return False
            return super().is_leaf_module(m, qualname)
    return Tracer


def plain(torch, model):
    """The graph module of torch.fx's own trace (raises where it cannot trace)."""
    tracer = _tracer_base(torch)()
    with _preserved(torch, model, False):  # the graph module takes the constants the trace made
        graph = tracer.trace(model)
        return torch.fx.GraphModule(tracer.root, graph, type(model).__name__)


@contextlib.contextmanager
def _preserved(torch, model, runs):
    """The model as it was before the trace, after it: a forward may assign attributes
    (`self.hidden = ...`, which tracing leaves as proxies), and where the trace `runs` the forward
    it may write buffers and tensor attributes in place (batch norm's running statistics). Not a
    copy of the model: a forward may call its layers through closures made at construction, which
    a copy would not follow; parameters, which a forward does not write, are not copied either."""
    attrs = [(m, dict(m.__dict__)) for m in model.modules()]
    tensors = []
    for m, d in attrs if runs else ():
        for v in list(d.get("_buffers", {}).values()) + list(d.values()):
            if isinstance(v, torch.Tensor) and not isinstance(v, torch.nn.Parameter):
                tensors.append((v, v.detach().clone()))
    try:
        yield model
    finally:
        for m, d in attrs:
            m.__dict__.clear()
            m.__dict__.update(d)
        with torch.no_grad():
            for v, saved in tensors:
                v.copy_(saved)


def concrete(torch, model, args):
    """The graph module of the concrete trace of model on args (the model left as it was: the
    forward runs while it is traced, _preserved)."""
    fx = torch.fx
    module = torch.nn.Module
    # while tracing, torch.fx patches nn.Module's __call__ and __getattr__ (a layer called gives a
    # proxy); the real values are computed with the originals, taken before the trace patches them
    real = (module.__call__, module.__getattr__)
    factories = {name: getattr(torch, name) for name in FACTORIES if hasattr(torch, name)}

    @contextlib.contextmanager
    def unpatched():
        patched = (module.__call__, module.__getattr__)
        recording = {name: getattr(torch, name) for name in factories}
        module.__call__, module.__getattr__ = real
        for name, fn in factories.items():
            setattr(torch, name, fn)
        try:
            yield
        finally:
            module.__call__, module.__getattr__ = patched
            for name, fn in recording.items():
                setattr(torch, name, fn)

    @contextlib.contextmanager
    def factories_recorded(tracer):
        # a tensor a forward makes from sizes alone (a causal mask) is recorded as the call that
        # makes it, not kept as a constant of its values
        py_dtypes = {bool: torch.bool, int: torch.int64, float: torch.get_default_dtype()}

        def recorder(fn):
            def record(*a, **kw):
                if kw.get("dtype") in py_dtypes:  # `dtype=bool`, which a graph cannot hold
                    kw["dtype"] = py_dtypes[kw["dtype"]]
                try:
                    return tracer.create_proxy("call_function", fn, a, kw)
                except NotImplementedError:  # an argument a graph cannot hold: a constant then
                    with unpatched():
                        return fn(*a, **kw)
            return record
        for name, fn in factories.items():
            setattr(torch, name, recorder(fn))
        try:
            yield
        finally:
            for name, fn in factories.items():
                setattr(torch, name, fn)

    args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]

    class Proxy(fx.Proxy):
        def __getattr__(self, k):
            if k in CONCRETE_ATTRS:
                return getattr(self.tracer.value(self.node), k)
            return super().__getattr__(k)

        def __len__(self):
            return len(self.tracer.value(self.node))

        def __iter__(self):
            return iter([self[i] for i in range(len(self.tracer.value(self.node)))])

    # einops (Mamba2's rearrange) takes only the array types it knows: a proxy is given its torch
    # backend, whose reshapes and permutes are then recorded (the shapes it reads are concrete)
    einops_backends = sys.modules.get("einops._backends")
    if einops_backends is not None and hasattr(einops_backends, "TorchBackend"):
        einops_backends._type2backend[Proxy] = einops_backends.TorchBackend()

    class Tracer(_tracer_base(torch)):
        def __init__(self):
            super().__init__()
            self.values, self.placeholders = {}, 0

        def proxy(self, node):
            return Proxy(node, self)

        def value(self, node):
            if node not in self.values and node.op == "get_attr":
                # tensors made while tracing become attributes of the root without a proxy
                v = self.root
                with unpatched():
                    for part in node.target.split("."):
                        v = getattr(v, part)
                self.values[node] = v
            return self.values[node]

        def create_proxy(self, kind, target, args_, kwargs, name=None, type_expr=None,
                         proxy_factory_fn=None, **more):
            if kind == "placeholder":
                i = self.placeholders
                self.placeholders += 1
                if i >= len(args) and args_:  # left out by get_inputs: its default, as a value
                    return args_[0]
            if kind == "call_method" and target in CONCRETE_METHODS:
                a, kw = self._values((args_, kwargs))
                return getattr(a[0], target)(*a[1:], **kw)
            if kind == "call_function" and target is getattr and len(args_) == 2 and args_[1] in CONCRETE_ATTRS:
                a, _ = self._values((args_, {}))
                return getattr(a[0], a[1])
            proxy = super().create_proxy(kind, target, args_, kwargs, name, type_expr, proxy_factory_fn, **more)
            node = proxy.node
            if kind == "placeholder":
                self.values[node] = args[i] if i < len(args) else (args_[0] if args_ else None)
                return proxy
            a, kw = fx.node.map_arg((node.args, node.kwargs), self.value)
            with unpatched():
                if kind == "get_attr":
                    self.values[node] = self.value(node)
                elif kind == "call_function":
                    self.values[node] = target(*a, **kw)
                elif kind == "call_method":
                    self.values[node] = getattr(a[0], target)(*a[1:], **kw)
                elif kind == "call_module":
                    self.values[node] = self.root.get_submodule(target)(*a, **kw)
            return proxy

        def _values(self, x):
            return torch.fx.node.map_aggregate(
                x, lambda v: self.value(v.node) if isinstance(v, fx.Proxy) else v)

    tracer = Tracer()
    with _preserved(torch, model, True), factories_recorded(tracer):
        graph = tracer.trace(model)
        return fx.GraphModule(tracer.root, graph, type(model).__name__)


def needs_concrete(model, args):
    """True when get_inputs leaves out arguments of forward that have defaults (the plain trace
    would make them inputs the model is never given)."""
    import inspect
    try:
        params = [p for p in inspect.signature(model.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return False
    return len(params) > len(args)


def unpack_compat(torch):
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
