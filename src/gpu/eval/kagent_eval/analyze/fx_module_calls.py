"""Functional forms of torch.nn layers that a traced graph calls with more than one input and whose
forward is a single public torch call around their parameters (fx_graph.py): the recurrent layers
(nn.LSTM, nn.GRU, nn.RNN: torch.lstm / torch.gru / torch.rnn_tanh / torch.rnn_relu, the calls
their forwards make) and nn.MultiheadAttention (torch.nn.functional.multi_head_attention_forward).
Each form takes the layer's parameters as ${p:..} values, so a subgraph holding the layer is a
problem with no module of its own (agents/lib/subproblem.lua), plain PyTorch that torch.compile
can also take. The forms follow torch.nn's forward for batched inputs; anything else (an
unbatched or packed input, dropout active in training mode) is Unsupported."""
import inspect

from .fx_forms import Unsupported

F = "torch.nn.functional."


def is_module_call(torch, m):
    nn = torch.nn
    return isinstance(m, (nn.RNNBase, nn.MultiheadAttention))


def form(torch, m, target, args, kwargs, render, shape_of):
    """(expr, params, label) of call_module `target` (layer m) with the node's args and kwargs.
    render(arg) -> source of an argument; shape_of(arg) -> its traced shape, or None."""
    try:
        bound = inspect.signature(m.forward).bind(*args, **kwargs)
    except TypeError as e:
        raise Unsupported("layer `%s` (%s) is called as its forward is not: %s" % (target, type(m).__name__, e))
    a = dict(bound.arguments)
    used = []

    def p(name):
        t = m
        for part in name.split("."):
            t = getattr(t, part, None)
        if t is None:
            return "None"
        used.append("%s.%s" % (target, name))
        return "${p:%s.%s}" % (target, name)

    if isinstance(m, torch.nn.RNNBase):
        return _rnn(torch, m, target, a, render, shape_of, p) + (used,)
    return _attention(m, target, a, render, shape_of, p) + (used,)


def _rnn(torch, m, target, a, render, shape_of, p):
    label = type(m).__name__
    x = a.get("input")
    shape = shape_of(x)
    if shape is None or len(shape) != 3:
        raise Unsupported("layer `%s` (%s) is called with an unbatched or packed input" % (target, label))
    if m.training and m.dropout and m.num_layers > 1:
        raise Unsupported("layer `%s` (%s) drops out at random in training mode" % (target, label))
    fns = {"LSTM": "torch.lstm", "GRU": "torch.gru", "RNN_TANH": "torch.rnn_tanh", "RNN_RELU": "torch.rnn_relu"}
    if m.mode not in fns:
        raise Unsupported("layer `%s` (%s) has no functional form here" % (target, label))
    xs = render(x)
    hx = a.get("hx")
    if hx is None:  # the zeros the layer's forward makes
        batch = shape[0] if m.batch_first else shape[1]
        rows = m.num_layers * (2 if m.bidirectional else 1)
        out = getattr(m, "proj_size", 0) or m.hidden_size

        def zeros(width):
            return "torch.zeros((%d, %d, %d), dtype=%s.dtype, device=%s.device)" % (rows, batch, width, xs, xs)
        hs = "(%s, %s)" % (zeros(out), zeros(m.hidden_size)) if m.mode == "LSTM" else zeros(out)
    else:
        hs = render(hx)
    weights = "[" + ", ".join(p(name) for name in m._flat_weights_names) + "]"
    call = "%s(%s, %s, %s, %r, %d, %r, %r, %r, %r)" % (
        fns[m.mode], xs, hs, weights, bool(m.bias), m.num_layers, float(m.dropout), bool(m.training),
        bool(m.bidirectional), bool(m.batch_first))
    if m.mode == "LSTM":  # torch.lstm returns (output, h, c); the layer (output, (h, c))
        call = "(lambda r: (r[0], (r[1], r[2])))(%s)" % call
    return call, label


def _attention(m, target, a, render, shape_of, p):
    label = type(m).__name__
    q, k, v = a.get("query"), a.get("key"), a.get("value")
    shape = shape_of(q)
    if shape is None or len(shape) != 3:
        raise Unsupported("layer `%s` (%s) is called with an unbatched query" % (target, label))
    if m.training and m.dropout:
        raise Unsupported("layer `%s` (%s) drops out at random in training mode" % (target, label))
    qs, ks, vs = render(q), render(k), render(v)
    if m.batch_first:
        qs, ks, vs = ["%s.transpose(1, 0)" % s for s in (qs, ks, vs)]
    parts = [qs, ks, vs, "%d" % m.embed_dim, "%d" % m.num_heads, p("in_proj_weight"), p("in_proj_bias"),
             p("bias_k"), p("bias_v"), repr(bool(m.add_zero_attn)), repr(float(m.dropout)),
             p("out_proj.weight"), p("out_proj.bias"), "training=%r" % bool(m.training)]
    if not m._qkv_same_embed_dim:
        parts += ["use_separate_proj_weight=True", "q_proj_weight=" + p("q_proj_weight"),
                  "k_proj_weight=" + p("k_proj_weight"), "v_proj_weight=" + p("v_proj_weight")]
    for name in ("key_padding_mask", "need_weights", "attn_mask", "average_attn_weights", "is_causal"):
        if name in a:
            parts.append("%s=%s" % (name, render(a[name])))
    call = F + "multi_head_attention_forward(%s)" % ", ".join(parts)
    if m.batch_first:
        call = "(lambda r: (r[0].transpose(1, 0), r[1]))(%s)" % call
    return call, label
