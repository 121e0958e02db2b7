-- The parts of agents/fuse.lua as functions of their inputs, on hand-made analyses (the shape the
-- evaluator's `analyze` op returns): the check of decompositions, subgraph problems and their
-- signatures, the router's rules, vote and memory, the composed forward and its proof. A FAKE
-- LLM (a list of replies) stands in for the vote. No Python, no network.
package.path = kagent.root .. "/?.lua;" .. package.path
local json = kagent.json
local llm = require("kagent.llm")
local decomposition = require("agents.lib.decomposition")
local splitter = require("agents.flows.splitter")
local first_kernel = require("agents.flows.first_kernel")
local subproblem = require("agents.lib.subproblem")
local router = require("agents.roles.router")
local composer = require("agents.roles.composer")
local decomposer = require("agents.roles.decomposer")
local run_lib = require("agents.run")
local rundir = require("agents.run.rundir")

local F32 = "float32"

local function op(name, o)
  o.name, o.dtype, o.tensor = name, o.dtype or F32, o.tensor ~= false
  o.params = o.params or {}
  return o
end

local function linear(name, input, width_in, width_out, rows)
  return op(name, { op = "Linear", category = "gemm", shape = { rows, width_out }, inputs = { input },
    expr = string.format("torch.nn.functional.linear(${v:%s}, ${p:%s.weight}, ${p:%s.bias})", input, name, name),
    params = { name .. ".weight", name .. ".bias" }, mean = 0, std = 1, _in = width_in })
end

local function relu(name, input, rows, width)
  return op(name, { op = "relu", category = "activation", shape = { rows, width }, inputs = { input },
    expr = string.format("torch.relu(${v:%s})", input), mean = 0.4, std = 0.6 })
end

-- x [4, 16] -> lin -> relu -> lin2 -> relu2; out = relu2 + relu (a residual)
local function analysis()
  local ops = { linear("lin", "x", 16, 16, 4), relu("relu", "lin", 4, 16), linear("lin2", "relu", 16, 16, 4),
    relu("relu2", "lin2", 4, 16),
    op("add", { op = "add", category = "elementwise", shape = { 4, 16 }, inputs = { "relu2", "relu" },
      expr = "(${v:relu2} + ${v:relu})" }) }
  local params = {}
  for _, n in ipairs({ "lin", "lin2" }) do
    params[n .. ".weight"] = { shape = { 16, 16 }, dtype = F32, kind = "parameter", mean = 0, std = 0.1 }
    params[n .. ".bias"] = { shape = { 16 }, dtype = F32, kind = "parameter", mean = 0, std = 0 }
  end
  return { ok = true, traced = true, decomposable = true, inputs = { { name = "x", shape = { 4, 16 }, dtype = F32, mean = 0, std = 1 } },
    placeholders = { { name = "x", tensor = true } }, ops = ops, outputs = { "add" }, output_expr = "${v:add}",
    params = params, used_params = { "lin.weight", "lin.bias", "lin2.weight", "lin2.bias" }, unsupported = {},
    module_types = { "Linear", "Model" }, param_bytes = 2176 }
end

local function v(name, shape) return { value = name, shape = shape } end
local S = { 4, 16 }
local function layers_plan()
  return { subgraphs = {
    { name = "layer1", ops = { "lin", "relu" }, inputs = { v("x", S) }, outputs = { v("relu", S) }, params = { "lin.weight", "lin.bias" } },
    { name = "layer2", ops = { "lin2", "relu2" }, inputs = { v("relu", S) }, outputs = { v("relu2", S) } },
    { name = "residual", ops = { "add" }, inputs = { v("relu2", S), v("relu", S) }, outputs = { v("add", S) } },
  } }
end

local function reasons_of(plan)
  local dec, why = decomposition.validate(analysis(), plan)
  expect.falsy(dec, "refused")
  return table.concat(why, "\n")
end

describe("decomposition check", function()
  it("accepts a decomposition that covers every op once with the traced borders", function()
    local dec, why = decomposition.validate(analysis(), layers_plan())
    expect.truthy(dec, why and table.concat(why, "; "))
    expect.same(dec.order, { "s1", "s2", "s3" })
    local s3 = dec.subgraphs[3]
    expect.same(s3.inputs, { { value = "relu2", shape = S, dtype = F32 }, { value = "relu", shape = S, dtype = F32 } })
    expect.truthy(s3.deps.s1 and s3.deps.s2, "the residual reads both layers")
    expect.same(dec.subgraphs[2].params, { "lin2.weight", "lin2.bias" }, "parameters found when not listed")
  end)

  it("refuses an op left out and a wrong shape, naming both", function()
    local p = layers_plan()
    p.subgraphs[3] = nil
    p.subgraphs[2].outputs = { v("relu2", { 4, 17 }) }
    local why = reasons_of(p)
    expect.match(why, "ops in no subgraph: add")
    expect.match(why, "subgraph 2 %(layer2%) output `relu2`: shape %[4, 17%] declared, the traced graph has %[4, 16%]")
  end)

  it("refuses unknown and twice-listed ops, and graph inputs listed as ops", function()
    local p = layers_plan()
    p.subgraphs[2].ops = { "lin2", "relu2", "relu", "softmax", "x" }
    local why = reasons_of(p)
    expect.match(why, "op `relu` is in subgraph 1 %(layer1%) and in subgraph 2 %(layer2%)")
    expect.match(why, "names `softmax`, which is not an op of the traced graph")
    expect.match(why, "names `x`, which is a graph input, not an op")
  end)

  it("refuses borders that are not the traced ones and parameters that do not match", function()
    local p = layers_plan()
    p.subgraphs[3].inputs = { v("relu2", S), v("lin", S) }
    p.subgraphs[1].params = { "lin.weight", "lin2.bias" }
    local why = reasons_of(p)
    expect.match(why, "declares input `lin`, which is not a value crossing its border")
    expect.match(why, "reads `relu` but does not declare it as an input")
    expect.match(why, "uses parameter `lin.bias` but does not list it")
    expect.match(why, "lists parameter `lin2.bias`, which its ops do not read")
  end)

  it("refuses subgraphs that need each other's results", function()
    local why = reasons_of({ subgraphs = {
      { name = "a", ops = { "lin", "relu2", "add" }, inputs = { v("x", S), v("lin2", S), v("relu", S) }, outputs = { v("lin", S), v("add", S) } },
      { name = "b", ops = { "relu", "lin2" }, inputs = { v("lin", S) }, outputs = { v("relu", S), v("lin2", S) } } } })
    expect.match(why, "in a cycle")
  end)

  it("refuses a tuple crossing between subgraphs and a reply without subgraphs", function()
    local a = analysis()
    a.ops[2].tensor = false
    local dec, why = decomposition.validate(a, layers_plan())
    expect.falsy(dec)
    expect.match(table.concat(why, "\n"), "reads `relu` from another subgraph, but it is not a tensor")
    local _, why2 = decomposition.validate(analysis(), { plan = "none" })
    expect.match(why2[1], "no non%-empty \"subgraphs\" array")
  end)

  it("gives the graph and earlier refusals to the prompt", function()
    local text = decomposition.text(analysis())
    expect.match(text, "lin: float32 %[4, 16%] = torch.nn.functional.linear%(x, lin.weight, lin.bias%)  %[gemm%]")
    expect.match(text, "Outputs: add")
    expect.match(decomposer.refusals_text({ { try = 1, reasons = { "ops in no subgraph: add" } } }),
      "Proposal 1:\n%- ops in no subgraph: add")
    expect.eq(decomposer.refusals_text({}), "")
  end)
end)

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

describe("subgraph problems", function()
  it("writes each subgraph as a problem with its parameters as inputs, one per signature", function()
    local a = analysis()
    local dec = assert(decomposition.validate(a, layers_plan()))
    local unique = subproblem.dedupe(a, dec, "model.py")
    expect.eq(#unique, 2, "the two layers compute the same thing on the same shapes")
    expect.same(unique[1].occurrences, { "s1", "s2" })
    expect.eq(dec.subgraphs[1].signature, dec.subgraphs[2].signature)
    expect.ne(dec.subgraphs[1].signature, dec.subgraphs[3].signature)
    local code = unique[1].code
    expect.match(code, "def forward%(self, x0, p0_weight, p1_bias%):")
    expect.match(code, "v0 = torch.nn.functional.linear%(x0, p0_weight, p1_bias%)  # lin")
    expect.match(code, "return v1")
    expect.match(code, "torch.randn%(%(4, 16%)%) %* 1 %+ 0,  # x")
    expect.match(code, "torch.randn%(%(16,%)%) %* 0.1 %+ 0,  # lin.bias", "a constant parameter is drawn with spread")
    expect.same(dec.subgraphs[3].args, { { kind = "value", name = "relu2" }, { kind = "value", name = "relu" } })
    expect.match(unique[2].code, "return v0")
  end)

  it("draws integer and boolean inputs in their own way", function()
    expect.eq(subproblem.input_expr({ shape = { 3 }, dtype = "int64", min = 0, max = 9 }), "torch.randint(0, 10, (3,), dtype=torch.int64)")
    expect.eq(subproblem.input_expr({ shape = {}, dtype = "bool" }), "torch.rand(()) < 0.5")
    expect.eq(subproblem.input_expr({ shape = { 2, 2 }, dtype = F32, mean = -0.5, std = 2 }), "torch.randn((2, 2)) * 2 - 0.5")
  end)
end)

describe("router", function()
  it("takes the direct path when the analysis leaves no other", function()
    local a = analysis()
    a.traced, a.trace_error = false, "TraceError: control flow"
    local s = router.static(a)
    expect.eq(s.path, "direct")
    expect.eq(s.hard, true)
    expect.match(s.reasons[1], "could not be traced")
    a = analysis()
    a.decomposable, a.unsupported = false, { { node = "attn", reason = "no functional form" } }
    expect.match(router.static(a).reasons[1], "no functional form %(op attn%)")
    a = analysis()
    a.ops = { a.ops[1] }
    expect.match(router.static(a).reasons[1], "one compute op")
  end)

  it("scores heavy ops, reductions, attention and epilogues", function()
    local s = router.static(analysis())
    expect.eq(s.path, "decompose", "two GEMMs")
    expect.eq(s.score, 2)
    local a = analysis()
    for i = 3, 5 do a.ops[i] = nil end
    a.outputs = { "relu" }
    s = router.static(a)
    expect.eq(s.path, "direct")
    expect.eq(s.score, -2)
    expect.match(s.reasons[1], "epilogue")
    -- q @ k^T -> softmax -> @ v is attention even when written out
    a = analysis()
    a.ops[2] = op("relu", { op = "softmax", category = "softmax", shape = S, inputs = { "lin" }, expr = "torch.softmax(${v:lin}, -1)" })
    local f = router.features(a)
    expect.eq(f.attention, true)
    s = router.static(a)
    expect.truthy(s.score >= 5, "heavy ops, attention and a reduction: " .. s.score)
  end)

  local function fake_run(replies, db)
    local sent = {}
    local r = { opts = { max_tokens = 100 }, model = "openai:fake", problem_code = "class Model: pass", dtype = "fp32",
      gpu_text = "FAKE", can_profile = false, device_name = "fake", rd = assert(rundir.open(spec.tmpdir("router"), "run")),
      skills = require("agents.lib.skills").load(kagent.root .. "/skills"),
      llm = { chat = function(req)
        sent[#sent + 1] = req
        local text = table.remove(replies, 1)
        if not text then return nil, "EFAKE: no more replies", "EFAKE" end
        return { text = text, usage = {} }
      end, extract_code = llm.extract_code, extract_json = llm.extract_json },
      db = db, mem = { info = { problem_hash = "h1" } } }
    run_lib.add_helpers(r)
    return r, sent
  end

  it("lets a vote decide a tie and not a clear score; remembers what worked", function()
    local db = assert(kagent.mem.open(":memory:"))
    local a = analysis()
    for i = 3, 5 do a.ops[i] = nil end
    a.outputs = { "relu" }
    local run, sent = fake_run({ '{"route": "decompose", "reason": "two passes"}' }, db)
    local r = router.decide(run, a, { vote = true })
    expect.eq(r.path, "decompose", "rules -2, vote +2: a tie goes to the vote")
    expect.eq(r.decided_by, "rules and vote")
    expect.match(sent[1].messages[1].content, "# ROUTE")
    expect.match(sent[1].messages[1].content, "The rules say %*%*direct%*%*")
    run = fake_run({ '{"route": "direct"}' }, db)
    r = router.decide(run, analysis(), { vote = true })
    expect.eq(r.path, "direct", "rules +2, vote -2: a tie, the vote")
    local b = analysis()
    b.ops[#b.ops + 1] = op("bn", { op = "BatchNorm1d", category = "norm", shape = S, inputs = { "add" }, expr = "${v:add}" })
    b.outputs = { "bn" }
    run = fake_run({ '{"route": "direct"}' }, db)
    r = router.decide(run, b, { vote = true })
    expect.eq(r.path, "decompose", "rules +3 outweigh the vote")
    run = fake_run({ "no json here" }, db)
    r = router.decide(run, analysis(), { vote = true })
    expect.eq(r.decided_by, "rules", "a reply without a route leaves the rules")
    expect.match(r.vote.error, "no route")
    expect.eq(router.decide(fake_run({}, db), analysis(), { force = "direct" }).decided_by, "option")

    -- memory: the newest finished fuse run of this problem whose route gave a verified program
    local id = db:start_run({ problem = "p.py", problem_hash = "h1", gpu = "cpu", policy = "fuse" })
    db:finish_run(id, "done", { route = { final = "direct" } })
    local failed = db:start_run({ problem = "p.py", problem_hash = "h1", gpu = "cpu", policy = "fuse" })
    db:finish_run(failed, "failed", { route = { final = json.null } })
    run, sent = fake_run({}, db)
    r = router.decide(run, analysis(), { vote = true })
    expect.eq(r.path, "direct")
    expect.eq(r.decided_by, "memory")
    expect.eq(r.cached_from, id)
    expect.eq(#sent, 0, "no vote asked")
    a = analysis()
    a.traced = false
    expect.eq(router.decide(run, a, { vote = true }).decided_by, "analysis", "memory never overrides what the analysis rules out")
    expect.eq(router.decide(run, analysis(), { vote = true, cache = false }).decided_by, "rules")
  end)
end)

describe("composer", function()
  it("writes a forward that calls only the kernels, with the model's parameter names", function()
    local a = analysis()
    a.used_params = { "net.0.weight", "net.0.bias", "lin2.weight", "lin2.bias", "steps" }
    a.ops[1].params = { "net.0.weight", "net.0.bias" }
    a.ops[1].expr = "torch.nn.functional.linear(${v:x}, ${p:net.0.weight}, ${p:net.0.bias})"
    a.params["net.0.weight"], a.params["net.0.bias"] = a.params["lin.weight"], a.params["lin.bias"]
    a.params.steps = { shape = {}, dtype = "int64", kind = "buffer" }
    a.output_expr = "(${v:add}, ${v:relu})"
    local plan = layers_plan()
    plan.subgraphs[1].params = nil
    local dec = assert(decomposition.validate(a, plan))
    subproblem.dedupe(a, dec, "model.py")
    local src = composer.forward(a, dec, { sg_1 = { kind = "ModelNew", name = "sg1_ModelNew" },
      sg_2 = { kind = "kernel_function", name = "sg2_kernel_function" } })
    expect.match(src, "_fuse_register%(self, 'net.0.weight', torch.nn.Parameter%(torch.empty%(%(16, 16%)%), requires_grad=False%)%)")
    expect.match(src, "_fuse_register%(self, 'steps', torch.empty%(%(%), dtype=torch.int64%)%)", "a buffer keeps its dtype")
    expect.match(src, "v_relu = self.k_sg_1%(x, getattr%(self.net, '0'%).weight, getattr%(self.net, '0'%).bias%)")
    expect.match(src, "v_relu2 = self.k_sg_1%(v_relu, self.lin2.weight, self.lin2.bias%)", "one instance for both layers")
    expect.match(src, "v_add = sg2_kernel_function%(v_relu2, v_relu%)")
    expect.match(src, "return %(v_add, v_relu%)")
    local n = 0
    for _ in src:gmatch("self.k_sg_1 = sg1_ModelNew%(%)") do n = n + 1 end
    expect.eq(n, 1)
    expect.match(src, "def forward%(self, x%):")
  end)

  it("accepts only a forward whose calls are all kernels, with no static finding and no library time", function()
    local clean = { ok = true, traced = true, kernel_calls = 2, foreign = {} }
    local p = composer.proof({ ok = true, audit = { applicable = false, static_findings = { { rule = "try_except", line = 3 } } } }, clean)
    expect.eq(p.ok, true)
    expect.match(p.audit, "not applicable in CPU mode")
    p = composer.proof({ audit = { applicable = false, static_findings = { { rule = "torch_compute_in_wrapper", line = 9, text = "torch.relu(x)" } } } },
      { ok = true, traced = true, foreign = { { target = ".contiguous", op = "call_method" } } })
    expect.eq(p.ok, false)
    local text = table.concat(p.reasons, "\n")
    expect.match(text, "static check torch_compute_in_wrapper at line 9")
    expect.match(text, "calls %.contiguous %(call_method%), which is not a subgraph kernel")
    p = composer.proof({ audit = { applicable = true, fallback = true, own_time_frac = 0.4, flagged_kernels = { "ampere_sgemm" } } }, clean)
    expect.eq(p.ok, false)
    expect.match(p.reasons[1], "library kernels on the hot path: ampere_sgemm")
    expect.eq(p.audit.own_time_frac, 0.4)
    p = composer.proof({ audit = {} }, { ok = true, traced = false, trace_error = "TraceError: x" })
    expect.match(p.reasons[1], "could not be traced: TraceError")
  end)
end)
