-- agents/flows/floor.lua (the LLM-free floor of agents/fuse.lua: which first-program candidates
-- are tried, which one is kept, what the row says), on a hand-made analysis, with a FAKE first-
-- kernel maker and a FAKE composer standing in for the evaluator (they return what the evaluator
-- would: a kernel, a composed program with its time). The max-autotune source's evaluator job is
-- checked against a FAKE pool. No Python, no GPU.
package.path = kagent.root .. "/?.lua;" .. package.path
local json = kagent.json
local floor = require("agents.flows.floor")
local first_kernel = require("agents.flows.first_kernel")
local fuse = require("agents.flows.fuse")
local fuse_rows = require("agents.tools.sweep.fuse_rows")
local splitter = require("agents.flows.splitter")

local F32, S = "float32", { 4, 16 }

local function op(name, o)
  o.name, o.dtype, o.tensor, o.params = name, F32, true, o.params or {}
  return o
end

-- x -> lin -> relu -> lin2 -> relu2; out = relu2 + relu: two GEMMs, so the splitter cuts twice
local function analysis(category)
  category = category or "gemm"
  local function linear(name, input)
    return op(name, { op = "Linear", category = category, shape = S, inputs = { input },
      expr = string.format("torch.nn.functional.linear(${v:%s}, ${p:%s.weight}, ${p:%s.bias})", input, name, name),
      params = { name .. ".weight", name .. ".bias" } })
  end
  local function relu(name, input)
    return op(name, { op = "relu", category = "activation", shape = S, inputs = { input }, expr = "torch.relu(${v:" .. input .. "})" })
  end
  local params = {}
  for _, n in ipairs({ "lin", "lin2" }) do
    params[n .. ".weight"] = { shape = { 16, 16 }, dtype = F32, kind = "parameter", mean = 0, std = 0.1 }
    params[n .. ".bias"] = { shape = { 16 }, dtype = F32, kind = "parameter", mean = 0, std = 0 }
  end
  return { ok = true, traced = true, decomposable = true, inputs = { { name = "x", shape = S, dtype = F32, mean = 0, std = 1 } },
    placeholders = { { name = "x", tensor = true } },
    ops = { linear("lin", "x"), relu("relu", "lin"), linear("lin2", "relu"), relu("relu2", "lin2"),
      op("add", { op = "add", category = "elementwise", shape = S, inputs = { "relu2", "relu" }, expr = "(${v:relu2} + ${v:relu})" }) },
    outputs = { "add" }, output_expr = "${v:add}", params = params,
    used_params = { "lin.weight", "lin.bias", "lin2.weight", "lin2.bias" }, unsupported = {} }
end

-- a FAKE run: options, the device's mode, and a run directory that keeps what is written in memory
local function fake_run(opts, mode)
  local o = { first = "auto", first_library = "allow", own_share = 1 }
  for k, v in pairs(opts or {}) do o[k] = v end
  local files = {}
  local rd = { files = files }
  function rd.path(_, p) return "/fake-run/" .. p end
  function rd.write(_, p, content) files[p] = content end
  return { opts = o, devices = { { mode = mode or "cuda" } }, problem_path = "/fake-run/problem.py", rd = rd }
end

-- FAKE first-kernel maker (fuse_sessions.first's contract): a kernel for each source of `order`
-- unless `refuse[source]`; notes every call
local function fake_first(calls, refuse)
  return function(_, u, path, out, order)
    calls[#calls + 1] = { dir = u.dir, path = path, order = order }
    for _, src in ipairs(order) do
      if not (refuse and refuse[src]) then
        u.first = { source = src, code = "# kernel " .. src }
        out.first = { source = src, verified = true }
        return
      end
    end
    out.first = { verified = false, error = "EMISMATCH: every source refused" }
  end
end

-- FAKE composer: a verified program timed at ms[dir] (nil: refused at the check)
local function fake_compose(calls, ms)
  return function(_, a, dec, unique, dir)
    calls[#calls + 1] = { dir = dir, subgraphs = #dec.subgraphs, kernel = dec.subgraphs[1].kernel, code = unique[1].kernel_code,
      ops = #dec.subgraphs[1].ops, analysis = a }
    if not ms[dir] then return { ok = false, error = "the composed program fails against the model at stage check: EMISMATCH" } end
    return { ok = true, code = "# program " .. dir, result = { time_ms = { median = ms[dir] }, eager_ms = 2.0, compile_ms = 1.0 },
      proof = { ok = true } }
  end
end

local function split_program(ms)
  return { ok = true, code = "# split", result = { time_ms = { median = ms }, eager_ms = 2.0, compile_ms = 1.0 }, proof = { ok = true } }
end

local function state(a)
  a = a or analysis()
  return { analysis = a, dec = assert(splitter.decompose(a)), stages = {} }
end

local function sources(plan)
  local out = {}
  for _, c in ipairs(plan) do out[#out + 1] = c.source .. (c.skipped and (" (" .. c.skipped .. ")") or "") end
  return out
end

describe("the floor's candidates", function()
  it("tries the whole problem and max-autotune beside the split on a GPU where the problem has a GEMM", function()
    local st = state()
    expect.same(sources(floor.plan(fake_run(), st.analysis, st.dec)), { "split", "whole", "max-autotune" })
  end)

  it("says why a candidate is not tried: one subgraph, no GEMM, CPU mode, --first reference, a recurrent layer, deny", function()
    local a = analysis()
    local one = { subgraphs = { {} } }
    local p = floor.plan(fake_run(), a, one)
    expect.eq(p[2].skipped, "the split is one subgraph: the whole problem already")
    expect.falsy(p[3].skipped, "max-autotune is still tried on a single subgraph")
    local plain = analysis("activation")
    p = floor.plan(fake_run(), plain, state().dec)
    expect.falsy(p[2].skipped)
    expect.match(p[3].skipped, "no GEMM or convolution")
    for _, c in ipairs({ { fake_run({}, "cpu"), "CPU mode" }, { fake_run({ first = "reference" }), "%-%-first reference" },
        { fake_run({ first_library = "deny" }), nil } }) do
      p = floor.plan(c[1], a, state().dec)
      if c[2] then
        expect.match(p[2].skipped, c[2])
        expect.match(p[3].skipped, c[2])
      else
        expect.falsy(p[2].skipped)
        expect.match(p[3].skipped, "%-%-first%-library deny")
      end
    end
    local rnn = analysis()
    rnn.ops[3].category = "recurrent"
    p = floor.plan(fake_run(), rnn, state().dec)
    expect.eq(p[2].skipped, first_kernel.RECURRENT_WHY)
  end)

  it("takes --floor: split alone, and refuses a list without split or with an unknown name", function()
    local st = state()
    expect.same(sources(floor.plan(fake_run({ floor = "split" }), st.analysis, st.dec)), { "split" })
    expect.same(sources(floor.plan(fake_run({ floor = "split, max-autotune" }), st.analysis, st.dec)), { "split", "max-autotune" })
    local _, why = floor.parse("whole,max-autotune")
    expect.match(why, "`split` must be listed")
    _, why = floor.parse("split,autotune")
    expect.match(why, "unknown candidate `autotune`.*split, whole, max%-autotune")
    expect.truthy(floor.parse(floor.DEFAULT))
  end)

  it("makes the whole problem one subgraph with the model's inputs, outputs and parameters", function()
    local dec = assert(floor.whole_dec(analysis()))
    expect.eq(#dec.subgraphs, 1)
    local s = dec.subgraphs[1]
    expect.same(s.ops, { "lin", "relu", "lin2", "relu2", "add" })
    expect.same(s.inputs, { { value = "x", shape = S, dtype = F32 } })
    expect.same(s.outputs, { { value = "add", shape = S, dtype = F32 } })
    expect.same(s.params, { "lin.weight", "lin.bias", "lin2.weight", "lin2.bias" })
  end)
end)

describe("the floor's choice", function()
  it("keeps the fastest verified program, and says which source gave it and what became of each", function()
    local st, firsts, composed = state(), {}, {}
    local run = fake_run()
    local fp = floor.choose(run, st, split_program(1.2), { first = fake_first(firsts),
      compose = fake_compose(composed, { first_whole = 0.9, first_whole_max_autotune = 0.7 }) })
    expect.eq(fp.floor_source, "max-autotune")
    expect.eq(fp.path_rel, "first_whole_max_autotune/compose/composed_kernel.py")
    expect.eq(st.floor.source, "max-autotune")
    -- each whole candidate: the whole problem as one subgraph, under its own folder, with its sources
    expect.same({ firsts[1].dir, firsts[2].dir }, { "whole", "whole_max_autotune" })
    expect.same(firsts[1].order, { "inductor", "inductor_eager_layout" })
    expect.same(firsts[2].order, { "inductor_max_autotune" })
    expect.eq(firsts[2].path, "/fake-run/fuse/whole_max_autotune/problem.py")
    expect.truthy(run.rd.files[firsts[2].path], "the whole problem's subgraph problem is written")
    expect.same({ composed[2].subgraphs, composed[2].ops, composed[2].kernel, composed[2].code },
      { 1, 5, "whole_max_autotune", "# kernel inductor_max_autotune" })
    local c = st.floor.candidates
    expect.same({ c[1].source, c[1].time_ms, c[2].source, c[2].time_ms, c[3].source, c[3].time_ms, c[3].kernel },
      { "split", 1.2, "whole", 0.9, "max-autotune", 0.7, "inductor_max_autotune" })
  end)

  it("keeps the split where it is as fast, and a whole program where max-autotune's kernel is refused", function()
    local st = state()
    local fp = floor.choose(fake_run(), st, split_program(0.9), { first = fake_first({}),
      compose = fake_compose({}, { first_whole = 0.9, first_whole_max_autotune = 0.95 }) })
    expect.eq(fp.floor_source, "split")
    expect.eq(fp.path_rel, "first/compose/composed_kernel.py")
    st = state()
    fp = floor.choose(fake_run(), st, split_program(1.5), { first = fake_first({}, { inductor_max_autotune = true }),
      compose = fake_compose({}, { first_whole = 1.1 }) })
    expect.eq(fp.floor_source, "whole")
    local mat = st.floor.candidates[3]
    expect.same({ mat.verified, mat.time_ms }, { false, json.null })
    expect.match(mat.error, "no first kernel: EMISMATCH")
  end)

  it("gives a floor where the split has none, and the split's failure where nothing verifies", function()
    local st = state()
    local fp = floor.choose(fake_run(), st, nil, { first = fake_first({}), compose = fake_compose({}, { first_whole = 1.0 }) })
    expect.eq(fp.floor_source, "whole")
    expect.match(st.floor.candidates[1].error, "no split program")
    st = state()
    local bad = { ok = false, error = "compose failed" }
    fp = floor.choose(fake_run(), st, bad, { first = fake_first({}), compose = fake_compose({}, {}) })
    expect.eq(fp, bad)
    expect.eq(st.floor.source, json.null)
  end)

  it("tries no whole program in CPU mode: the split is the floor, as before", function()
    local st, firsts = state(), {}
    local split = split_program(1.0)
    local fp = floor.choose(fake_run({}, "cpu"), st, split, { first = fake_first(firsts), compose = fake_compose({}, {}) })
    expect.eq(fp, split)
    expect.eq(#firsts, 0)
    expect.match(st.floor.candidates[2].skipped, "CPU mode")
  end)
end)

describe("the max-autotune source", function()
  it("asks the evaluator's inductor kind for max-autotune, and the default source does not", function()
    local jobs = {}
    local run = fake_run()
    run.dtype = "fp32"
    run.pool = { analyze = function(_, j) jobs[#jobs + 1] = j; return { ok = true, source = "# k" } end }  -- FAKE pool
    expect.eq(first_kernel.inductor(run, {}, "/p.py", "allow", "inductor", true), "# k")
    expect.eq(first_kernel.inductor(run, {}, "/p.py", "allow", "inductor"), "# k")
    expect.same({ jobs[1].kind, jobs[1].max_autotune, jobs[2].max_autotune }, { "inductor", true, false })
    expect.match(first_kernel.label("inductor_max_autotune", false), "max%-autotune")
  end)
end)

describe("the floor in the rows", function()
  it("names the candidate kept in the summary's first_program and the sweep's table", function()
    local st = state()
    st.sessions = { { dir = "sg_1", first = { source = "inductor", verified = true } } }
    st.first_program = floor.choose(fake_run(), st, split_program(1.2), { first = fake_first({}),
      compose = fake_compose({}, { first_whole = 1.0, first_whole_max_autotune = 0.8 }) })
    local row = fuse.first_row(fake_run(), st)
    expect.same({ row.verified, row.source, row.path, row.time_ms }, { true, "max-autotune",
      "first_whole_max_autotune/compose/composed_kernel.py", 0.8 })
    expect.eq(#row.candidates, 3)
    expect.eq(row.candidates[1].kernel, "inductor", "the split names its kernels' sources")
    local r = fuse_rows.row({ mode = "fuse", first_program = row, subgraphs = { count = 2, distinct = 2 } })
    expect.same({ r.floor_source, r.first_sources }, { "max-autotune", "inductor_max_autotune" })
    local rows = { { name = "p1", status = "done", fuse = r } }
    local text = fuse_rows.table_text(rows, fuse_rows.aggregate(rows))
    expect.match(text, "| verified %(max%-autotune: inductor_max_autotune%) |")
    expect.match(text, "floor programs kept: max%-autotune 1")
  end)
end)
