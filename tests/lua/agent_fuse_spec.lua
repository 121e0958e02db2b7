-- The plan of agents/fuse.lua as functions of its inputs, on a hand-made analysis
-- (tests/fixtures/fuse/hand_analysis.lua): the check of decompositions, the subgraph problems and
-- their signatures, the composed forward and its proof. The FX splitter and the first kernels are
-- in agent_fuse_splitter_spec.lua, the router in agent_fuse_router_spec.lua. No Python, no network.
package.path = kagent.root .. "/?.lua;" .. kagent.root .. "/tests/fixtures/fuse/?.lua;" .. package.path
local decomposition = require("agents.lib.decomposition")
local subproblem = require("agents.lib.subproblem")
local composer = require("agents.roles.composer")
local decomposer = require("agents.roles.decomposer")
local hand = require("hand_analysis")

local F32, S, v = hand.F32, hand.S, hand.v
local analysis, layers_plan = hand.analysis, hand.layers_plan

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
