-- agents/flows/splitter.lua (the FX splitter: where a traced graph is cut without an LLM) and
-- agents/flows/first_kernel.lua (the first kernel of each subgraph: which to try, in what order,
-- what may be composed untimed), on a hand-made analysis (tests/fixtures/fuse/hand_analysis.lua).
-- No Python, no network.
package.path = kagent.root .. "/?.lua;" .. kagent.root .. "/tests/fixtures/fuse/?.lua;" .. package.path
local splitter = require("agents.flows.splitter")
local first_kernel = require("agents.flows.first_kernel")
local subproblem = require("agents.lib.subproblem")
local hand = require("hand_analysis")

local F32, S, op, analysis = hand.F32, hand.S, hand.op, hand.analysis

describe("the FX splitter", function()
  it("cuts before each GEMM, keeps the epilogue with it, and its plan passes the decomposition check", function()
    local dec, why = splitter.decompose(analysis())
    expect.truthy(dec, why and table.concat(why, "; "))
    expect.eq(#dec.subgraphs, 2)
    expect.same(dec.subgraphs[1].ops, { "lin", "relu" })
    expect.same(dec.subgraphs[2].ops, { "lin2", "relu2", "add" }, "the residual add is the second GEMM's epilogue")
    expect.same(dec.subgraphs[2].inputs, { { value = "relu", shape = S, dtype = F32 } })
    expect.eq(dec.subgraphs[1].fusion, "gemm with its epilogue")
    expect.same(dec.order, { "s1", "s2" })
  end)

  it("puts ops before the first GEMM in a prologue and moves trailing views to the next subgraph", function()
    local a = analysis()
    local flat = op("flat", { op = "flatten", category = "view", shape = { 4, 16 }, inputs = { "relu" },
      expr = "torch.flatten(${v:relu}, 1)" })
    local neg = op("neg", { op = "neg", category = "elementwise", shape = { 4, 16 }, inputs = { "x" }, expr = "(-${v:x})" })
    a.ops[1].inputs, a.ops[1].expr = { "neg" }, "torch.nn.functional.linear(${v:neg}, ${p:lin.weight}, ${p:lin.bias})"
    a.ops[3].inputs, a.ops[3].expr = { "flat" }, "torch.nn.functional.linear(${v:flat}, ${p:lin2.weight}, ${p:lin2.bias})"
    table.insert(a.ops, 1, neg)
    table.insert(a.ops, 4, flat)
    local dec, why = splitter.decompose(a)
    expect.truthy(dec, why and table.concat(why, "; "))
    expect.same(dec.subgraphs[1].ops, { "neg" })
    expect.eq(dec.subgraphs[1].fusion, "pointwise prologue")
    expect.same(dec.subgraphs[2].ops, { "lin", "relu" })
    expect.same(dec.subgraphs[3].ops, { "flat", "lin2", "relu2", "add" }, "the view goes with the GEMM that reads it")
  end)

  it("keeps the views that take a tuple apart with its maker, and a prologue of views alone with the next GEMM", function()
    -- x -> pick (a view) -> lin, a recurrent layer's tuple `rnn` read by `out` = rnn[0] and then
    -- sliced by `last` (views), lin2 reads `last`
    local a = analysis()
    local pick = op("pick", { op = "getitem", category = "view", shape = { 4, 16 }, inputs = { "x" }, expr = "${v:x}[0]" })
    local rnn = op("rnn", { op = "GRU", category = "recurrent", tensor = false, inputs = { "relu" },
      expr = "torch.gru(${v:relu})" })
    local out = op("out", { op = "getitem", category = "view", shape = { 4, 16 }, inputs = { "rnn" }, expr = "${v:rnn}[0]" })
    local last = op("last", { op = "getitem", category = "view", shape = { 4, 16 }, inputs = { "out" }, expr = "${v:out}[:]" })
    a.ops[1].inputs, a.ops[1].expr = { "pick" }, "torch.nn.functional.linear(${v:pick}, ${p:lin.weight}, ${p:lin.bias})"
    a.ops[3].inputs, a.ops[3].expr = { "last" }, "torch.nn.functional.linear(${v:last}, ${p:lin2.weight}, ${p:lin2.bias})"
    table.insert(a.ops, 1, pick)
    for k, o in ipairs({ rnn, out, last }) do table.insert(a.ops, 3 + k, o) end
    local dec, why = splitter.decompose(a)
    expect.truthy(dec, why and table.concat(why, "; "))
    expect.same(dec.subgraphs[1].ops, { "pick", "lin", "relu" }, "x[0] alone would return its input's memory")
    expect.same(dec.subgraphs[2].ops, { "rnn", "out" }, "rnn[0] stays with the tuple's maker")
    expect.eq(dec.subgraphs[2].fusion, "recurrent with its epilogue")
    expect.same(dec.subgraphs[3].ops, { "last", "lin2", "relu2", "add" })
  end)

  it("merges subgraphs where a view of a subgraph's input would cross: no subgraph returns its input's memory", function()
    local a = analysis()
    local xv = op("xv", { op = "view", category = "view", shape = { 4, 16 }, inputs = { "x" }, expr = "${v:x}.view(4, 16)" })
    a.ops[1].inputs, a.ops[1].expr = { "xv" }, "torch.nn.functional.linear(${v:xv}, ${p:lin.weight}, ${p:lin.bias})"
    table.insert(a.ops, 1, xv)
    local dec, why = splitter.decompose(a)
    expect.truthy(dec, why and table.concat(why, "; "))
    expect.eq(#dec.subgraphs, 2, "xv is read by its own subgraph only")
    a.ops[6].inputs, a.ops[6].expr = { "relu2", "xv" }, "(${v:relu2} + ${v:xv})"  -- the residual reads x's view
    dec, why = splitter.decompose(a)
    expect.truthy(dec, why and table.concat(why, "; "))
    expect.eq(#dec.subgraphs, 1, "x.view would leave the first subgraph as its input's memory")
  end)

  it("merges subgraphs where a view of a parameter would cross: the subgraph takes it as an input", function()
    local a = analysis()
    local wv = op("wv", { op = "view", category = "view", shape = { 4, 16 }, inputs = {}, params = { "lin.bias" },
      expr = "${p:lin.bias}.expand(4, 16)" })
    local neg = op("neg", { op = "neg", category = "elementwise", shape = { 4, 16 }, inputs = { "x" }, expr = "(-${v:x})" })
    a.ops[1].inputs, a.ops[1].expr = { "neg" }, "torch.nn.functional.linear(${v:neg}, ${p:lin.weight}, ${p:lin.bias})"
    table.insert(a.ops, 1, wv)
    table.insert(a.ops, 2, neg)
    local dec, why = splitter.decompose(a)
    expect.truthy(dec, why and table.concat(why, "; "))
    expect.eq(#dec.subgraphs, 3, "wv is read inside the prologue only")
    a.ops[7].inputs, a.ops[7].expr = { "relu2", "wv" }, "(${v:relu2} + ${v:wv})"  -- the residual reads the view
    dec, why = splitter.decompose(a)
    expect.truthy(dec, why and table.concat(why, "; "))
    expect.eq(#dec.subgraphs, 1, "lin.bias's view would leave the prologue as its input's memory")
  end)

  it("merges subgraphs a tuple would cross, and says why a graph without a functional form cannot be split", function()
    local a = analysis()
    a.ops[2].tensor = false  -- `relu` a tuple, read by lin2 and add
    local dec, why = splitter.decompose(a)
    expect.truthy(dec, why and table.concat(why, "; "))
    expect.eq(#dec.subgraphs, 1, "the tuple stays inside one subgraph")
    local b = analysis()
    b.decomposable, b.unsupported = false, { { node = "lstm", reason = "layer `lstm` (LSTM) has parameters and no functional form here" } }
    local none, why2 = splitter.decompose(b)
    expect.falsy(none)
    expect.match(why2[1], "cannot be split: layer `lstm` %(LSTM%)")
  end)

  it("writes the reference kernel of a subgraph as a plain kernel_function of its ops", function()
    local dec = splitter.decompose(analysis())
    local unique = subproblem.dedupe(analysis(), dec, "p.py")
    expect.same(unique[1].categories, { gemm = true, activation = true }, "the analysis's categories of its ops")
    local src = first_kernel.reference(unique[1])
    expect.match(src, "def kernel_function%(x0, p0_weight, p1_bias%):")
    expect.match(src, "v0 = torch.nn.functional.linear%(x0, p0_weight, p1_bias%)")
    expect.match(src, "return v1")
    expect.falsy(src:find("class ", 1, true), "no module between the composed forward and the ops")
    expect.same(first_kernel.order({ opts = { first = "auto" }, devices = { { mode = "cpu" } } }), { "reference" })
    expect.same(first_kernel.order({ opts = { first = "auto", first_library = "deny" }, devices = { { mode = "cuda" } } }),
      { "inductor", "inductor_eager_layout" })
    expect.same(first_kernel.order({ opts = { first = "auto", first_library = "allow" }, devices = { { mode = "cuda" } } }),
      { "inductor", "inductor_eager_layout", "reference" })
  end)

  it("tries Inductor with eager's layouts only for a convolution whose Inductor kernel was wrong", function()
    local conv = { function_body = "def kernel_function(x0, p0):\n    return torch.nn.functional.conv2d(x0, p0)" }
    local gemm = { function_body = "def kernel_function(x0, p0):\n    return x0 @ p0" }
    expect.truthy(first_kernel.worth("inductor_eager_layout", conv, { inductor = { code = "EMISMATCH" } }))
    expect.truthy(first_kernel.worth("inductor_eager_layout", conv, { inductor = { code = "EPROPERTY" } }))
    -- refused for another reason, not evaluated at all, or no convolution: the layout is not why
    expect.falsy(first_kernel.worth("inductor_eager_layout", conv, { inductor = { code = "ETAMPER" } }))
    expect.falsy(first_kernel.worth("inductor_eager_layout", conv, {}))
    expect.falsy(first_kernel.worth("inductor_eager_layout", gemm, { inductor = { code = "EMISMATCH" } }))
    expect.truthy(first_kernel.worth("reference", gemm, {}))
    expect.eq(first_kernel.label("inductor_eager_layout", false), "TorchInductor Triton (eager's layouts)")
  end)

  it("composes a kernel right on every trial whose timing was not trusted, where none was timed", function()
    local checks = { values = true, shape = true, properties = true, no_alias = true }
    local spread = { ok = false, stage = "timing", code = "EUNTRUSTED", checks = checks,
      error = "EUNTRUSTED: the timed calls vary too much (p90/p10 above the limit)" }
    local tamper = { ok = false, stage = "benchmark", code = "ETAMPER", checks = checks,
      error = "ETAMPER: timed calls took 8.3 ms each by the worker's clock, 0.019 ms reported" }
    local wrong = { ok = false, stage = "correctness", code = "EMISMATCH", checks = { values = false },
      error = "EMISMATCH: trial 0" }
    local stale = { ok = false, stage = "timing", code = "ESTALE", checks = checks, error = "ESTALE: call 3" }
    local order = { "inductor", "inductor_eager_layout", "reference" }
    local src, why = first_kernel.untimed(order, { inductor = spread, reference = tamper })
    expect.eq(src, "inductor", "the first in order")
    expect.match(why, "vary too much")
    expect.eq(first_kernel.untimed(order, { inductor = wrong, reference = tamper }), "reference")
    -- a wrong value, a stale output, or a check that did not pass: never composed
    expect.eq(first_kernel.untimed(order, { inductor = wrong, reference = stale }), nil)
    local half = { ok = false, stage = "timing", code = "EUNTRUSTED", error = "EUNTRUSTED: x",
      checks = { values = true, inputs_unchanged = false } }
    expect.eq(first_kernel.untimed(order, { inductor = half }), nil)
    expect.eq(first_kernel.untimed(order, { inductor = "no code: EINDUCTOR" }), nil)
  end)

  it("leaves Inductor out for a recurrent layer where the reference ops come after it", function()
    local lstm = { categories = { recurrent = true, view = true } }
    local gemm = { categories = { gemm = true } }
    local allow = { "inductor", "inductor_eager_layout", "reference" }
    local ok, why = first_kernel.worth("inductor", lstm, {}, allow)
    expect.falsy(ok)
    expect.match(why, "recurrent layer")
    expect.falsy(first_kernel.worth("inductor_eager_layout", lstm, {}, allow), "Inductor was not tried")
    expect.truthy(first_kernel.worth("reference", lstm, {}, allow))
    expect.truthy(first_kernel.worth("inductor", gemm, {}, allow))
    -- with library kernels denied there is nothing after Inductor: it is still tried
    expect.truthy(first_kernel.worth("inductor", lstm, {}, { "inductor", "inductor_eager_layout" }))
  end)
end)
