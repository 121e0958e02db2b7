"""The functional forms of traced ops (analyze_problem.py, fx_graph.py): each op of a problem's
torch.fx graph written as a Python expression over its values and parameters, its label and its
category, or Unsupported where it has none."""
import copy
import math
import operator

# labels -> category, for the router's features (agents/roles/router.lua reads categories)
CATEGORIES = [
    ("attention", {"scaled_dot_product_attention", "MultiheadAttention"}),
    ("recurrent", {"LSTM", "GRU", "RNN"}),
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
    # a loss reduces its inputs to one figure (or one per sample)
    ("loss", {"cross_entropy", "CrossEntropyLoss", "nll_loss", "NLLLoss", "mse_loss", "MSELoss",
              "l1_loss", "L1Loss", "smooth_l1_loss", "SmoothL1Loss", "huber_loss", "HuberLoss",
              "kl_div", "KLDivLoss", "triplet_margin_loss", "TripletMarginLoss",
              "margin_ranking_loss", "MarginRankingLoss", "hinge_embedding_loss",
              "HingeEmbeddingLoss", "cosine_embedding_loss", "CosineEmbeddingLoss",
              "binary_cross_entropy", "BCELoss", "binary_cross_entropy_with_logits",
              "BCEWithLogitsLoss", "cosine_similarity", "CosineSimilarity", "pairwise_distance",
              "PairwiseDistance"}),
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
              "bfloat16", "Dropout", "dropout", "Dropout1d", "Dropout2d", "Dropout3d", "unfold",
              "diagonal", "swapaxes", "swapdims", "as_strided"}),
]
CATEGORY = {label: cat for cat, labels in CATEGORIES for label in labels}

INFIX = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/",
          operator.floordiv: "//", operator.mod: "%", operator.pow: "**", operator.matmul: "@",
          operator.eq: "==", operator.ne: "!=", operator.lt: "<", operator.le: "<=",
          operator.gt: ">", operator.ge: ">=", operator.and_: "&", operator.or_: "|",
          operator.xor: "^", operator.lshift: "<<", operator.rshift: ">>"}
INFIX_LABEL = {operator.add: "add", operator.sub: "sub", operator.mul: "mul",
                operator.truediv: "div", operator.floordiv: "floordiv", operator.mod: "mod",
                operator.pow: "pow", operator.matmul: "matmul"}
# calls whose Python result depends only on tensor metadata (shapes are fixed: safe to fold)
META_METHODS = {"size", "dim", "numel", "stride", "nelement", "ndimension", "element_size",
                 "is_contiguous", "get_device"}
META_ATTRS = {"shape", "ndim", "dtype", "is_cuda", "device"}
# attributes that are views of their tensor (`self.weight.T`): category "view", like `.t()`
VIEW_ATTRS = {"T", "mT", "H", "mH", "real", "imag"}


class Unsupported(Exception):
    """An op that has no functional form here: the graph cannot be decomposed."""


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


ELEMENTWISE = {"add", "sub", "mul", "div", "floordiv", "mod", "pow", "neg", "exp", "log", "sqrt",
                "rsqrt", "abs", "clamp", "clip", "where", "maximum", "minimum", "reciprocal", "sign",
                "sin", "cos", "erf", "exp2", "log2", "log1p", "expm1", "square", "lerp", "addcmul",
                "addcdiv", "masked_fill", "floor", "ceil", "round", "trunc", "fmod", "remainder",
                "lt", "le", "gt", "ge", "eq", "ne", "logical_and", "logical_or", "logical_not",
                "bitwise_and", "bitwise_or", "sigmoid_", "hypot", "atan2", "clamp_min", "clamp_max"}


def inplace_method(torch, name):
    return name.endswith("_") and not name.endswith("__") and hasattr(torch.Tensor, name[:-1])


def writes_read_value(torch, gm, n):
    """An in-place op (x.add_(..), F.relu(.., inplace=True), nn.ReLU(inplace=True)) whose
    target value other ops read too."""
    if n.op == "call_method":
        inplace = inplace_method(torch, n.target)
    elif n.op == "call_function":
        inplace = n.kwargs.get("inplace") is True
    elif n.op == "call_module":
        inplace = getattr(gm.get_submodule(n.target), "inplace", False) is True
    else:
        return False
    target = n.args[0] if n.args else None
    return inplace and isinstance(target, torch.fx.Node) and len(target.users) > 1


def dropout_active(n, kwargs):
    p = kwargs.get("p", n.args[1] if len(n.args) > 1 else 0.5)
    training = kwargs.get("training", n.args[2] if len(n.args) > 2 else True)
    return bool(training) and p not in (0, 0.0)


def nodes_in(arg):
    import torch.fx
    found = []
    torch.fx.node.map_arg(arg, lambda a: found.append(a))
    return found


def small_constant(torch, gm, target):
    """Source that rebuilds a tensor constant of the traced module with at most 16 elements
    (`torch.tensor(...)`, on the CPU: a 0-d one combines with tensors on any device), or None."""
    t = gm
    for part in target.split("."):
        t = getattr(t, part, None)
    if not isinstance(t, torch.Tensor) or t.numel() > 16 or t.requires_grad:
        return None
    return "torch.tensor(%r, dtype=%s)" % (t.tolist(), t.dtype)


def value_meta(m):
    out = {"shape": m.get("shape"), "dtype": m.get("dtype")}
    for k in ("mean", "std", "min", "max"):
        if k in m:
            out[k] = m[k]
    return out


def target_label(n):
    t = n.target
    return t if isinstance(t, str) else getattr(t, "__name__", str(t))


def function_name(torch, fn):
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


def module_form(torch, m, target, x):
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


def module_ctor(torch, m):
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
