-- End to end on the CPU: agents/fuse.lua against the FAKE LLM server
-- (tests/fixtures/fake_llm/server.py) with scripted routes, decompositions and subgraph kernels
-- (tests/fixtures/fuse/cpu/: pure PyTorch, as CPU mode wants), on the CPU-sized examples. Needs
-- torch (KAGENT_PYTHON); the evaluator's timings are not asserted (the machine is shared).
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs, json = kagent.fs, kagent.json
local fake = require("fake_session")
local cpu = fake.cpu()
local root = kagent.root
local fx = root .. "/tests/fixtures/fuse/cpu/"
local gemm = root .. "/examples/problems/l2_gemm_bias_gelu_scale_small.py"
local mlp = root .. "/examples/problems/l3_mlp_small.py"
local conv = root .. "/examples/problems/l2_conv_bn_relu_small.py"

local function code(name)
  return "Here is the kernel.\n```python\n" .. assert(fs.read(fx .. name), "cannot read " .. name) .. "```\n"
end
local function plan(subgraphs) return fake.fenced({ subgraphs = subgraphs }) end
local function sg(name, ops, ins, outs, params)
  return { name = name, ops = ops, inputs = ins, outputs = outs, params = params }
end
local function v(name, shape) return { value = name, shape = shape } end

local env_for = cpu.env

local function read_json(path) return json.decode(assert(fs.read(path), "cannot read " .. path)) end

local function the_run(out)
  local rd = fake.newest_run(out)
  expect.truthy(rd, "a run directory in " .. out)
  return rd
end

-- fuse(server, port, dir, out, argv, first) -> run folder, summary of agents/fuse.lua on the CPU
-- with one generation worker against the fake server (stopped, and the spec failed, when the run
-- fails). Unless `first`, the run takes the LLM's decompositions and kernels only (--decomposer
-- llm --first none): what these specs script.
local function fuse(server, port, dir, out, argv, first)
  local a = { "--gen-workers", "1", "--devices", "cpu", "--out", dir .. "/" .. out }
  if not first then for _, x in ipairs({ "--decomposer", "llm", "--first", "none" }) do a[#a + 1] = x end end
  for _, x in ipairs(argv) do a[#a + 1] = x end
  local r = fake.run_agent("fuse.lua", a, env_for(dir, port), 600)
  if r.code ~= 0 then
    server:kill()
    error("fuse.lua exited " .. r.code .. "\n" .. r.stderr:sub(-4000), 2)
  end
  local rd = the_run(dir .. "/" .. out)
  return rd, read_json(rd .. "/summary.json")
end

-- index of the first request text containing `needle`, from the server's record
local function first_request(texts, needle)
  for i, t in ipairs(texts) do if t:find(needle, 1, true) then return i end end
end

local function stats(port)
  local res = assert(kagent.http.request({ url = "http://127.0.0.1:" .. port .. "/_stats?texts=1", timeout = 10 }))
  return json.decode(res.body)
end

-- GEMM + bias + GELU + scaling: the rules say direct, the scripted vote says decompose. The first
-- decomposition leaves out an op and declares a wrong shape; the second one is accepted. The
-- kernel of subgraph 1 first forgets the bias and is refined.
local GOOD = plan({
  sg("gemm_bias", { "gemm", "add" }, { v("x", { 16, 64 }) }, { v("add", { 16, 32 }) }, { "gemm.weight", "bias" }),
  sg("gelu_scale", { "gelu", "mul" }, { v("add", { 16, 32 }) }, { v("mul", { 16, 32 }) }),
})
local BAD = plan({
  sg("gemm_bias", { "gemm", "add" }, { v("x", { 16, 64 }) }, { v("add", { 16, 99 }) }),
  sg("gelu", { "gelu" }, { v("add", { 16, 32 }) }, { v("gelu", { 16, 32 }) }),
})
local function gemm_script()
  return { latency = 0, replies = {
    { match = "# ROUTE", text = fake.fenced({ route = "decompose", reason = "scripted vote" }) },
    { match = "Proposal 1:", text = GOOD },
    { match = "# DECOMPOSE INTO SUBGRAPHS", text = BAD },
    { match = "BROKEN_SG1", text = code("gemm_add.py") },
    { match = "ops gemm, add.", text = code("gemm_add_broken.py") },
    { match = "ops gelu, mul.", text = code("gelu_scale.py") },
  } }
end

describe("agents/fuse.lua on CPU with the fake LLM server", function()
  it("routes by rules and vote, refuses a bad decomposition before generating, refines a subgraph kernel, "
    .. "composes and verifies; a second run reuses route and kernels; beam.lua optimizes the result", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("fuse-gemm")
    local server, port = fake.start(gemm_script(), dir)
    local rd, s = fuse(server, port, dir, "runs", { "--problem", gemm })
    local texts = stats(port).texts
    expect.eq(s.mode, "fuse")
    expect.eq(s.verified, true)
    expect.eq(s.path, "decompose")
    expect.eq(s.route.static.path, "direct", "the rules alone say direct (one GEMM with an epilogue)")
    expect.eq(s.route.vote.route, "decompose")
    expect.eq(s.route.decided_by, "rules and vote")
    expect.eq(s.route.final, "decompose")

    -- the refusal: reasons named, and written before any generation request was sent
    local refused = read_json(rd .. "/fuse/decompose_1_refused.json")
    local reasons = table.concat(refused.reasons, "\n")
    expect.match(reasons, "ops in no subgraph: mul")
    expect.match(reasons, "output `add`: shape %[16, 99%] declared, the traced graph has %[16, 32%]")
    expect.falsy(fs.exists(rd .. "/fuse/decompose_2_refused.json"), "the second proposal is accepted")
    expect.match(fs.read(rd .. "/fuse/decompose_2_prompt.txt"), "Proposal 1:\n%- ops in no subgraph: mul",
      "the second request carries the reasons")
    local second, gen = first_request(texts, "Proposal 1:"), first_request(texts, "# GENERATE KERNEL")
    expect.truthy(second and gen and second < gen, "no generation request before the decomposition was accepted")
    expect.eq(s.refused_decompositions, 1)

    -- the decomposition and one generation session per subgraph
    local sj = read_json(rd .. "/fuse/subgraphs.json")
    expect.eq(#sj.subgraphs, 2)
    expect.same(sj.subgraphs[1].ops, { "gemm", "add" })
    expect.same(sj.subgraphs[2].inputs, { { dtype = "float32", shape = { 16, 32 }, value = "add" } })
    expect.eq(#sj.unique, 2)
    local p1 = fs.read(rd .. "/fuse/sg_1/problem.py")
    expect.match(p1, "def forward%(self, x0, p0_weight, p1_bias%)", "parameters are inputs of the subgraph problem")
    expect.match(p1, "def get_inputs%(%)")
    expect.eq(read_json(rd .. "/fuse/sg_1/generate/w1/verify_0.json").ok, false, "the first kernel of sg_1 fails")
    expect.match(fs.read(rd .. "/fuse/sg_1/generate/w1/refine_1_prompt.txt"), "BROKEN_SG1")
    expect.eq(read_json(rd .. "/fuse/sg_1/generate/w1/verify_1.json").ok, true, "its refinement verifies")
    expect.eq(read_json(rd .. "/fuse/sg_2/verify.json").ok, true)
    expect.eq(s.subgraphs.kernels[1].attempts, 2)
    expect.eq(s.subgraphs.kernels[2].attempts, 1)
    expect.truthy(s.subgraphs.kernels[1].tokens > 0, "each session's tokens are its own")

    -- the composed program: only the kernels on its hot path, verified against the model
    local composed = fs.read(rd .. "/compose/composed_kernel.py")
    expect.match(composed, "class sg1_ModelNew")
    expect.match(composed, "self%.k_sg_1%(x, self%.gemm%.weight, self%.bias%)")
    expect.eq(fs.read(rd .. "/best_kernel.py"), composed)
    local cv = read_json(rd .. "/compose/verify.json")
    expect.eq(cv.ok, true)
    expect.truthy(type(cv.eager_ms) == "number", "timed next to eager")
    local hot = read_json(rd .. "/compose/hot_path.json")
    expect.eq(hot.traced, true)
    expect.eq(hot.kernel_calls, 2)
    expect.eq(#hot.foreign, 0)
    expect.eq(s.compose.proof.ok, true)
    expect.eq(#s.compose.proof.static_findings, 0)

    -- per-stage figures
    for _, name in ipairs({ "route", "decompose", "generate", "compose" }) do
      local stg = s.stages[name]
      expect.truthy(stg and type(stg.wall_s) == "number" and type(stg.tokens) == "number" and stg.cost_usd ~= nil, "stage " .. name)
    end
    expect.eq(s.stages.decompose.llm_calls, 2)
    expect.eq(s.stages.generate.llm_calls, 3, "sg_1: generate + refine, sg_2: generate")
    expect.eq(s.stages.compose.llm_calls, 0)

    -- a second run: the route comes from memory (no vote), the kernels from the archive
    local _, s2 = fuse(server, port, dir, "runs2", { "--problem", gemm })
    local texts2 = stats(port).texts
    server:kill()
    expect.eq(s2.route.decided_by, "memory")
    expect.eq(s2.route.cached_from, s.memory_run_id)
    expect.eq(#texts2 - #texts, 2, "only the two decomposition calls: no vote, no generation")
    expect.match(tostring(s2.subgraphs.kernels[1].reused), "^archive #")

    -- the composed program goes straight into beam.lua as its start kernel
    local bserver, bport = fake.start(fake.script({ n = 1, kernels = { fx .. "gemm_full.py" } }), dir)
    local b = fake.run_agent("beam.lua", { "--problem", gemm, "--kernel", rd .. "/best_kernel.py", "--rounds", "1",
      "--beam", "1", "--directions", "1", "--devices", "cpu", "--out", dir .. "/beam" }, env_for(dir, bport), 600)
    bserver:kill()
    if b.code ~= 0 then error("beam.lua exited " .. b.code .. "\n" .. b.stderr:sub(-4000)) end
    local bd = the_run(dir .. "/beam")
    local bs = read_json(bd .. "/summary.json")
    expect.eq(bs.input_kernel, rd .. "/best_kernel.py")
    expect.eq(bs.rounds, 1)
    expect.eq(bs.attempts, 1)
    expect.eq(read_json(bd .. "/input_eval.json").ok, true, "the composed program verifies as beam's input")
    expect.eq(read_json(bd .. "/rounds/round_1/w1/benchmark_results.json").kernels.kernel_round_1.ok, true,
      "the round's child verifies")
    expect.truthy(type(bs.best_ms) == "number")
  end, { timeout = 900 })

  it("writes one kernel for repeated layers of the MLP and calls it for each", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("fuse-mlp")
    -- hidden layer i: Linear network_<2i-2> and its ReLU network_<2i-1>, reading `input` of `width`
    local function layer(i, input, width)
      return sg("layer" .. i, { "network_" .. (2 * i - 2), "network_" .. (2 * i - 1) }, { v(input, { 8, width }) },
        { v("network_" .. (2 * i - 1), { 8, 64 }) })
    end
    local server, port = fake.start({ latency = 0, replies = {
      { match = "# DECOMPOSE INTO SUBGRAPHS", text = plan({ layer(1, "x", 32), layer(2, "network_1", 64),
        layer(3, "network_3", 64), sg("head", { "network_6" }, { v("network_5", { 8, 64 }) }, { v("network_6", { 8, 16 }) }) }) },
      { match = "ops network_6.", text = code("linear.py") },
      { match = "# GENERATE KERNEL", text = code("linear_relu.py") },
    } }, dir)
    local rd, s = fuse(server, port, dir, "runs", { "--problem", mlp, "--no-vote" })
    local texts = stats(port).texts
    server:kill()
    expect.eq(s.route.decided_by, "rules")
    expect.eq(s.route.static.path, "decompose", "four GEMMs: the rules decompose")
    expect.eq(s.subgraphs.count, 4)
    expect.eq(s.subgraphs.distinct, 3, "layers 2 and 3 have one signature")
    local sj = read_json(rd .. "/fuse/subgraphs.json")
    expect.same(sj.unique[2].occurrences, { "s2", "s3" })
    expect.eq(sj.subgraphs[2].signature, sj.subgraphs[3].signature)
    expect.falsy(fs.exists(rd .. "/fuse/sg_4"), "no session for the repeated layer")
    local gens = 0
    for _, t in ipairs(texts) do if t:find("# GENERATE KERNEL", 1, true) then gens = gens + 1 end end
    expect.eq(gens, 3, "three generation calls for four subgraphs")
    local composed = fs.read(rd .. "/compose/composed_kernel.py")
    local calls = 0
    for _ in composed:gmatch("self%.k_sg_2%(") do calls = calls + 1 end
    expect.eq(calls, 2, "the shared kernel is called for both layers")
    expect.match(composed, "getattr%(self%.network, '2'%)%.weight", "parameters keep the model's names")
    expect.eq(read_json(rd .. "/compose/hot_path.json").kernel_calls, 4)
    expect.eq(s.verified, true)
  end, { timeout = 900 })

  it("stops with exit 3 when the LLM goes down while subgraph kernels are generated, without falling back", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("fuse-outage")
    local server, port = fake.start({ latency = 0, replies = { { match = "# DECOMPOSE INTO SUBGRAPHS", text = GOOD },
      { status = 500 } } }, dir)
    local r = fake.run_agent("fuse.lua", { "--problem", gemm, "--route", "decompose", "--gen-workers", "1", "--devices",
      "cpu", "--decomposer", "llm", "--first", "none", "--out", dir .. "/runs", "--llm-timeout", "total=2s", "--llm-backoff", "0.05", "--llm-failures", "3" },
      env_for(dir, port), 600)
    server:kill()
    expect.eq(r.code, 3, r.stderr:sub(-2000))
    expect.match(r.stderr, "the LLM stopped answering")
    local s = read_json(the_run(dir .. "/runs") .. "/summary.json")
    expect.eq(s.status, "failed")
    expect.eq(s.verified, false)
    expect.eq(s.route.fallback, json.null, "no fallback: the direct path needs the LLM too")
    expect.eq(s.stages.direct, nil)
    expect.truthy(s.llm_failures.calls >= 3, "the failed calls are counted")
  end, { timeout = 600 })

  it("falls back to the direct path when every decomposition is refused; needs an LLM and good options", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("fuse-fallback")
    local server, port = fake.start({ latency = 0, replies = {
      -- the BN op left out, and a made-up op named
      { match = "# DECOMPOSE INTO SUBGRAPHS", text = plan({
        sg("conv", { "conv", "softmax" }, { v("x", { 4, 3, 8, 8 }) }, { v("conv", { 4, 8, 8, 8 }) }),
        sg("relu", { "relu" }, { v("bn", { 4, 8, 8, 8 }) }, { v("relu", { 4, 8, 8, 8 }) }) }) },
      { match = "# GENERATE KERNEL", text = code("conv_bn_relu_full.py") },
    } }, dir)
    local rd, s = fuse(server, port, dir, "runs", { "--problem", conv, "--route", "decompose", "--decompose-tries", "2" })
    local texts = stats(port).texts
    server:kill()
    expect.eq(s.route.decided_by, "option")
    expect.eq(s.route.fallback.from, "decompose")
    expect.eq(s.route.fallback.to, "direct")
    expect.match(s.route.fallback.reason, "all 2 decompositions were refused")
    expect.eq(s.route.final, "direct")
    expect.eq(s.path, "direct")
    expect.eq(s.verified, true)
    expect.eq(s.refused_decompositions, 2)
    expect.match(table.concat(read_json(rd .. "/fuse/decompose_2_refused.json").reasons, "\n"), "names `softmax`, which is not an op")
    expect.falsy(fs.exists(rd .. "/fuse/subgraphs.json"), "nothing accepted, nothing generated for subgraphs")
    expect.eq(read_json(rd .. "/generate/summary.json").winner, 1, "the direct path's generation session")
    expect.truthy(s.stages.direct and s.stages.direct.ok, "the direct stage is accounted")
    local analysis = read_json(rd .. "/fuse/analysis.json")
    expect.eq(analysis.decomposable, true)
    expect.match(analysis.ops[2].expr, "batch_norm%(%${v:conv}, None, None", "batch statistics in training mode")
    expect.eq(#texts, 3, "two decompositions, one generation")

    local n = fake.run_agent("fuse.lua", { "--problem", conv, "--devices", "cpu", "--out", dir .. "/none" }, env_for(dir), 600)
    expect.eq(n.code, 2)
    expect.match(n.stderr, "no LLM is configured")
    for _, bad in ipairs({ { { "--route", "decomp" }, "did you mean 'decompose'?" },
        { { "--own-share", "2" }, "--own-share expects a number > 0 and <= 1, got '2'" },
        { { "--decompose-tries", "0" }, "--decompose-tries expects a whole number >= 1" },
        { { "--no-llm", "--route", "direct" }, "--no-llm takes the decompose path with the splitter's decomposition; --route direct needs an LLM" },
        { { "--no-llm", "--decomposer", "llm" }, "--decomposer llm needs an LLM" } }) do
      local argv = { "--problem", conv, "--out", dir .. "/bad" }
      for _, x in ipairs(bad[1]) do argv[#argv + 1] = x end
      local b = fake.run_agent("fuse.lua", argv, env_for(dir), 60)
      expect.eq(b.code, 2, table.concat(bad[1], " "))
      expect.truthy(b.stderr:find(bad[2], 1, true), b.stderr)
    end
    expect.falsy(fs.exists(dir .. "/bad"), "refused before any run folder")
    local h = fake.run_agent("fuse.lua", { "--help" }, env_for(dir), 60)
    expect.eq(h.code, 0)
    expect.match(h.stdout, "usage: kagent%-rt agents/fuse.lua %-%-problem P")
    expect.match(h.stdout, "Route and decomposition:")
  end, { timeout = 900 })

  it("with no LLM: the splitter's decomposition and a first program of the reference's own ops, which runs "
    .. "exactly the reference's ATen ops (no op, no copy added)", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("fuse-nollm")
    local r = fake.run_agent("fuse.lua", { "--problem", mlp, "--no-llm", "--devices", "cpu", "--out", dir .. "/runs" },
      env_for(dir), 600)
    expect.eq(r.code, 0, r.stderr:sub(-3000))
    local rd = the_run(dir .. "/runs")
    local s = read_json(rd .. "/summary.json")
    expect.eq(s.verified, true)
    expect.eq(s.decomposition.by, "splitter")
    expect.match(s.decomposition.reason, "checked against the trace")
    -- the route came from --no-llm, never from a --route that was not given
    expect.eq(s.route.reason, "--no-llm (no --route given): the LLM-free path is the splitter's decomposition")
    expect.falsy(r.stderr:find("--route decompose", 1, true), "no --route named:\n" .. r.stderr:sub(-2000))
    expect.eq(s.subgraphs.count, 4, "one subgraph per Linear with its ReLU")
    expect.eq(s.subgraphs.distinct, 3)
    expect.eq(s.refused_decompositions, 0)
    local fp = s.first_program
    expect.eq(fp.verified, true)
    expect.eq(#fp.kernels, 3)
    for _, k in ipairs(fp.kernels) do
      expect.eq(k.source, "reference")
      expect.match(k.label, "CPU stand%-in")
      expect.eq(k.verified, true)
      -- nothing compares a first kernel's time with no LLM: verified, not timed; the program is
      expect.eq(k.time_ms, json.null)
      expect.eq(read_json(rd .. "/fuse/" .. k.dir .. "/first_reference/verify.json").time_ms, nil)
    end
    expect.eq(fp.hot_path.kernel_calls, 4)
    expect.eq(#fp.hot_path.foreign, 0, "the composed forward calls only the subgraph kernels")
    expect.truthy(type(fp.eager_ms) == "number" and type(fp.speedup_vs_eager) == "number", "timed next to eager")
    expect.eq(s.best.from, "first/compose/composed_kernel.py")
    expect.eq(s.tokens.output, 0, "no LLM call")
    local p = kagent.proc.run({ spec.python, root .. "/tests/tools/aten_ops.py", mlp, rd .. "/best_kernel.py" }, { timeout = 300 })
    expect.eq(p.code, 0, p.stderr)
    local ops = json.decode(p.stdout)
    expect.truthy(#ops.reference >= 8, "the reference runs its ops")
    expect.same(ops.candidate, ops.reference)
  end, { timeout = 600 })

  it("a first kernel right on every trial whose timing is not trusted is composed where the LLM's kernels "
    .. "fail, and the program's own verdict decides (a spread limit no loop of calls meets: refused, failing "
    .. "closed)", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("fuse-untimed")
    -- every reply has no kernel in it: each subgraph's generation fails
    local server, port = fake.start({ latency = 0, replies = { { match = "", text = "No kernel today." } } }, dir)
    local r = fake.run_agent("fuse.lua", { "--problem", gemm, "--route", "decompose", "--decomposer", "rules",
      "--gen-workers", "1", "--refine", "0", "--devices", "cpu", "--max-spread", "1.0000001",
      "--out", dir .. "/runs" }, env_for(dir, port), 600)
    server:kill()
    expect.eq(r.code, 1, "no program: " .. r.stderr:sub(-3000))
    local s = read_json(the_run(dir .. "/runs") .. "/summary.json")
    expect.eq(s.verified, false)
    local fp = s.first_program
    expect.truthy(#fp.kernels >= 1)
    -- which refusal of its figure a loop meets first (its spread, or the worker's clock on a
    -- loaded machine) is the machine's; that the figure was refused, and not the values, is not.
    -- The limit holds the control (the reference's own loop) too, so the evaluator may call the
    -- machine too noisy (ENOISY, "not measured"): no figure either way
    local function timing_refusal(text)
      local code = tostring(text):match("(E%u+): ")
      return code == "EUNTRUSTED" or code == "ENOISY" or code == "ETAMPER" or code == "ECACHE"
    end
    for _, k in ipairs(fp.kernels) do
      expect.eq(k.source, "reference")
      expect.eq(k.verified, true, "right on every trial")
      expect.truthy(timing_refusal(k.untimed), "composed for want of a trusted time: " .. tostring(k.untimed))
      expect.eq(k.time_ms, json.null, "no figure kept for it")
    end
    for _, k in ipairs(s.subgraphs.kernels) do expect.eq(k.kept, "first (reference)", k.dir) end
    expect.eq(fp.stage, "compose", "the untimed kernels were composed")
    expect.truthy(timing_refusal(fp.reason), "the program refused for its own figure: " .. tostring(fp.reason))
  end, { timeout = 600 })

  it("with the fake LLM: starts from the first program and keeps it when the LLM's kernels are slower", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("fuse-first")
    local server, port = fake.start({ latency = 0, replies = {
      { match = "ops network_6.", text = code("linear_slow_fake.py") },
      { match = "# GENERATE KERNEL", text = code("linear_relu_slow_fake.py") },
    } }, dir)
    local rd, s = fuse(server, port, dir, "runs", { "--problem", mlp, "--no-vote", "--route", "decompose" }, true)
    local texts = stats(port).texts
    server:kill()
    expect.eq(s.decomposition.by, "splitter")
    local decompose_calls = 0
    for _, t in ipairs(texts) do if t:find("# DECOMPOSE INTO SUBGRAPHS", 1, true) then decompose_calls = decompose_calls + 1 end end
    expect.eq(decompose_calls, 0, "the splitter's decomposition was accepted: the LLM was not asked for one")
    expect.eq(s.first_program.verified, true)
    for _, k in ipairs(s.subgraphs.kernels) do
      expect.truthy(k.attempts and k.attempts >= 1, "the LLM wrote a kernel for " .. k.dir .. ": " .. json.encode(k))
      expect.eq(k.kept, "first (reference)", k.dir .. ": the slower LLM kernel is not kept")
    end
    expect.eq(s.best.from, "first/compose/composed_kernel.py")
    expect.eq(fs.read(rd .. "/best_kernel.py"), fs.read(rd .. "/first/compose/composed_kernel.py"))
  end, { timeout = 900 })
end)
