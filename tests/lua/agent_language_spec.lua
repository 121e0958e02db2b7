-- --language and --library (agents/run/language.lua): each value reaches the prompts and every
-- evaluator job, each entry point has its default policy, the seed's granularity is read from its
-- reply, and a user's prompts/language_<id>.md shadows the shipped one. Runs are small FAKE tables
-- (a FAKE pool that records its jobs, a FAKE LLM module, tests/fixtures/agent/fake_chat.lua).
package.path = kagent.root .. "/?.lua;" .. kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fake_chat = require("fake_chat")
local fs = kagent.fs
local run_lib = require("agents.run")
local rundir = require("agents.run.rundir")
local startup = require("agents.search.startup")
local generator = require("agents.roles.generator")
local summary = require("agents.search.summary")

local PROBLEM = kagent.root .. "/examples/problems/rmsnorm_small.py"

local function fake_run(opts, gpu, replies)
  local fake_llm, sent = fake_chat(replies or {})
  local pool = { jobs = {} }
  function pool:benchmark(job)
    self.jobs[#self.jobs + 1] = job
    return { ok = true, stage = "done", time_ms = { median = 1.0, p10 = 0.99, p90 = 1.01 } }
  end
  pool.evaluate = pool.benchmark
  local o = { refine = 0, max_tokens = 100 }
  for k, v in pairs(opts) do o[k] = v end
  local r = { opts = o, llm = fake_llm, model = "openai:fake", pool = pool,
    rd = assert(rundir.open(spec.tmpdir("lang"), "run")), problem_code = "class Model: pass", dtype = "fp32",
    gpu_text = "FAKE", can_profile = gpu, device_name = gpu and "FAKE H100" or "cpu",
    skills = require("agents.lib.skills").load(kagent.root .. "/skills") }
  run_lib.add_helpers(r)
  return r, sent, pool
end

describe("--language", function()
  -- what each language and device mode must tell the model
  local CASES = {
    { language = "triton", gpu = true, id = "triton", says = "`@triton.jit`" },
    { language = "triton", gpu = false, id = "pytorch_cpu", says = "pure PyTorch operations" },
    { language = "cuda", gpu = true, id = "cuda", says = "at::cuda::getCurrentCUDAStream" },
    { language = "cuda", gpu = false, id = "cpp_cpu", says = "no\n?%s*`cuda_sources`" },
  }
  for _, c in ipairs(CASES) do
    it(string.format("%s on %s: the system and generation prompts say how to write it", c.language,
      c.gpu and "a GPU" or "the CPU"), function()
      local run, sent = fake_run({ language = c.language, library = "own" }, c.gpu,
        { "GRANULARITY: several ops\n```python\nclass ModelNew: pass\n```" })
      expect.eq(run.language_id, c.id)
      expect.match(run.system_prompt(), c.says)
      local g = generator.propose(run, { k = 1, n = 1 })
      expect.eq(g.code, "class ModelNew: pass")
      expect.match(g.prompt, c.says, "the generation prompt carries the language's rules")
      expect.match(sent[1].system, c.says)
      expect.eq(g.granularity, "several_ops")
    end)
  end

  it("is checked when the options are parsed", function()
    local opts, err = require("agents.run.args").parse({ "--problem", PROBLEM, "--language", "rust" },
      require("agents.run.options"), { prog = "agents/beam.lua" })
    expect.eq(opts, nil)
    expect.match(err, "%-%-language must be one of triton, cuda, got 'rust'")
  end)

  it("is shadowed from KAGENT_HOME like every prompt", function()
    local home = spec.tmpdir("lang-home")
    assert(fs.mkdir_p(home .. "/prompts"))
    assert(fs.write(home .. "/prompts/language_cuda.md", "USER_CUDA_RULES {{library_rule}}\n"))
    local fake = dofile(kagent.root .. "/tests/fixtures/fake_llm/fake.lua")
    local r = fake.run_script([[
      local run = { opts = { language = "cuda", library = "any" }, can_profile = true }
      require("agents.run.prompts").add(run)
      print(kagent.json.encode({ rules = run.language_rules() }))
    ]], { KAGENT_HOME = home })
    expect.eq(r.code, 0, r.stderr)
    expect.match(r.out.rules, "^USER_CUDA_RULES Library calls are allowed")
  end)
end)

describe("--library", function()
  for _, policy in ipairs({ "own", "some", "any" }) do
    it(policy .. " reaches every evaluator job and the prompt", function()
      local run, _, pool = fake_run({ language = "cuda", library = policy }, true)
      expect.eq(run.job("code").library, policy)
      run.evaluate("class ModelNew: pass")
      expect.eq(pool.jobs[1].library, policy, "the job a candidate is judged by")
      local rule = require("agents.run.language").LIBRARY_RULES[policy]
      expect.match(run.system_prompt(), rule:sub(1, 40):gsub("%p", "%%%0"), "the policy's rule in the system prompt")
    end)
  end

  -- startup.open as each entry point calls it, stopped at the plan: the options it settled
  local function settled(prog, argv, spec_)
    local got
    local dir = spec.tmpdir("lang-open")
    local args = { "--problem", PROBLEM, "--devices", "cpu", "--db", dir .. "/mem.db", "--out", dir }
    for _, a in ipairs(argv) do args[#args + 1] = a end
    local run, code = startup.open(prog, args, { spec = spec_, how = {}, plan = function(opts)
      got = opts
      return nil, 99
    end })
    expect.eq(run, nil)
    expect.eq(code, 99, "stopped at the plan")
    return got
  end

  it("defaults to some for agents/skill.lua and to own for the others; a given value wins", function()
    local fuse_spec = require("agents.flows.fuse_options")
    expect.eq(settled("agents/skill.lua", {}).library, "some")
    expect.eq(settled("agents/beam.lua", {}).library, "own")
    expect.eq(settled("agents/tune.lua", {}).library, "own")
    expect.eq(settled("agents/fuse.lua", {}, fuse_spec).library, "own")
    expect.eq(settled("agents/skill.lua", { "--library", "any" }).library, "any")
    expect.eq(settled("agents/beam.lua", { "--library", "some" }).library, "some")
    expect.eq(settled("agents/fuse.lua", { "--library", "any", "--language", "cuda" }, fuse_spec).language, "cuda")
    expect.eq(settled("agents/beam.lua", {}).language, "triton")
  end)

  it("generate.lua takes both options", function()
    local fake = dofile(kagent.root .. "/tests/fixtures/fake_llm/fake.lua")
    local r = assert(kagent.proc.run({ fake.self_exe(), kagent.root .. "/agents/generate.lua", "--help" }, { timeout = 60 }))
    expect.eq(r.code, 0, r.stderr)
    expect.match(r.stdout, "%-%-language <choice>")
    expect.match(r.stdout, "%-%-library <choice>")
  end)
end)

describe("skills in a language's words", function()
  it("take their intent for the run's language, and a skill for other languages is not loaded", function()
    local skills_lib = require("agents.lib.skills")
    local function by_name(list)
      local t = {}
      for _, sk in ipairs(list) do t[sk.name] = sk end
      return t
    end
    local triton = by_name(skills_lib.load(kagent.root .. "/skills", "triton"))
    local cuda = by_name(skills_lib.load(kagent.root .. "/skills", "cuda"))
    expect.match(triton.tf32_gemm.intent, "tl%.dot")
    expect.match(cuda.tf32_gemm.intent, "wmma::precision::tf32")
    expect.eq(cuda.fusion.intent, triton.fusion.intent, "a skill with no CUDA wording keeps its one intent")
    local dir = spec.tmpdir("lang-skills")
    assert(fs.write(dir .. "/cuda_only.lua", 'return { name = "cuda_only", category = "compute", intent = "x", '
      .. 'languages = { "cuda" }, applies = function() return nil end, expected = {}, avoid = {} }'))
    expect.eq(#skills_lib.load(dir, "cuda"), 1)
    expect.eq(#skills_lib.load(dir, "triton"), 0)
    -- a run in CUDA sends the CUDA wording in its skill catalogue
    local run = fake_run({ language = "cuda", library = "own" }, true)
    run.skills = skills_lib.load(kagent.root .. "/skills", "cuda")
    expect.match(run.system_prompt(), "wmma::precision::tf32")
  end)
end)

describe("granularity of a seed", function()
  it("is read from the reply's GRANULARITY line, unstated where there is none", function()
    expect.eq(generator.granularity("GRANULARITY: one hotspot\n```python\nx\n```"), "one_hotspot")
    expect.eq(generator.granularity("Plan.\n**Granularity:** Fuse many.\n"), "fuse_many")
    expect.eq(generator.granularity("granularity = full_rewrite"), "full_rewrite")
    expect.eq(generator.granularity("GRANULARITY: everything"), "unstated")
    expect.eq(generator.granularity("```python\nx\n```"), "unstated")
    expect.eq(generator.granularity(nil), "unstated")
  end)
end)

describe("granularity on the generation's records", function()
  it("is each worker's outcome's and the winner's", function()
    local run = fake_run({ language = "cuda", library = "own", refine = 0 }, false,
      { "**GRANULARITY:** one hotspot\n```python\nclass ModelNew: pass\n```" })
    run.mem = { info = { problem_hash = "h" }, db = { lessons = function() return {} end } }
    run.progress = { update = function() end }
    run.usage = function() return { tokens = 0, cost_usd = 0 } end
    local w = require("agents.search.generate").run(run, 1)
    expect.eq(w.granularity, "one_hotspot")
    local g = kagent.json.decode(fs.read(run.rd:path("generate/summary.json")))
    expect.eq(g.outcomes[1].granularity, "one_hotspot")
  end)
end)

describe("the own share on report.html", function()
  it("shows the language, the policy and, where known, the share carried by the run's own kernels", function()
    package.path = kagent.root .. "/tests/fixtures/report/?.lua;" .. package.path
    local json = kagent.json
    local run_page = require("agents.tools.report.run_page")
    local dir = require("synthetic_run").write(spec.tmpdir("lang-report") .. "/run")
    local s = json.decode(fs.read(dir .. "/summary.json"))
    s.language, s.library, s.own_share, s.library_kernels = "cuda", "some", 0.42, { "sm90_xmma_gemm_f32f32" }
    fs.write(dir .. "/summary.json", json.encode(s))
    local page = assert(fs.read(assert(run_page.write(dir))))
    expect.truthy(page:find("language / library</div><div>cuda / some: own kernels carry 42% of the GPU time "
      .. "(library: sm90_xmma_gemm_f32f32)", 1, true), "the header row")
    s.own_share, s.own_share_unknown = nil, "CPU mode: no GPU kernels are profiled"
    fs.write(dir .. "/summary.json", json.encode(s))
    page = assert(fs.read(assert(run_page.write(dir))))
    expect.truthy(page:find("cuda / some: own share unknown: CPU mode: no GPU kernels are profiled</div>", 1, true),
      "the reason where the verdict has no share")
    s.own_share_unknown, s.library_kernels, s.language, s.library = nil, nil, nil, nil
    fs.write(dir .. "/summary.json", json.encode(s))
    page = assert(fs.read(assert(run_page.write(dir))))
    expect.truthy(page:find("language / library</div><div>triton / own</div>", 1, true), "a run from before the options")
  end)
end)

describe("the own share on the last line", function()
  it("shows the policy and the share where the verdict has one, nothing where not", function()
    local s = { library = "some" }
    summary.add_library(s, { own_share = 0.21, library_kernels = { "cutlass_80_tensorop_s1688gemm", { name = "cudnn_x" } } })
    expect.eq(s.own_share, 0.21)
    expect.eq(summary.library_line(s),
      "\n  library policy some: own kernels carry 21% of the GPU time: library kernels cutlass_80_tensorop_s1688gemm, cudnn_x")
    local none = { library = "own" }
    summary.add_library(none, { ok = true })
    expect.eq(none.own_share, nil)
    expect.eq(summary.library_line(none), "")
    -- no share (CPU mode): summary.json says why, the tables show "?" (agents/lib/own_share.lua)
    summary.add_library(none, { ok = true, own_share_unknown = "CPU mode: no GPU kernels are profiled", library_kernels = {} })
    expect.eq(none.own_share_unknown, "CPU mode: no GPU kernels are profiled")
    expect.eq(summary.library_line(none), "")
  end)
end)
