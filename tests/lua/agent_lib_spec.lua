-- Pure helpers of the agents: args, prompt rendering, tunables, fingerprints, metrics, skills, judge.
-- The published traces are read from KAGENT_KA_ARTIFACTS (default ../shared/data/ka-artifacts
-- beside the checkout); those cases are skipped, saying so, where the folder is absent.
package.path = kagent.root .. "/?.lua;" .. package.path
local args = require("agents.run.args")
local options = require("agents.run.options")
local prompt = require("kagent.prompt")
local tunables = require("agents.lib.tunables")
local fingerprint = require("agents.lib.fingerprint")
local metrics = require("agents.lib.metrics")
local skills = require("agents.lib.skills")
local features = require("agents.lib.features")
local judge = require("agents.roles.judge")
local ARTIFACTS = os.getenv("KAGENT_KA_ARTIFACTS") or (kagent.root .. "/../shared/data/ka-artifacts")

describe("args", function()
  it("parses values, flags and defaults, and rejects unknown options", function()
    local o = assert(args.parse({ "--problem", "p.py", "--rounds=3", "--budget-usd", "1.5", "--tuner" }, options))
    expect.eq(o.problem, "p.py"); expect.eq(o.rounds, 3); expect.eq(o.budget_usd, 1.5)
    expect.eq(o.tuner, true); expect.eq(o.beam, 2); expect.eq(o.dtype, "fp32")
    local bad, err = args.parse({ "--roundz", "3" }, options)
    expect.eq(bad, nil); expect.match(err, "unknown option")
    local _, err2 = args.parse({ "--rounds", "x" }, options)
    expect.match(err2, "number")
  end)
end)

describe("kagent.prompt", function()
  it("renders variables, nested names, optional ones and fails on a missing one", function()
    expect.eq(prompt.render_string("a {{x}} {{g.name}} {{opt?}}!", { x = 3, g = { name = "H100" } }), "a 3 H100 !")
    expect.errors(function() prompt.render_string("{{nope}}", {}) end, "missing variable 'nope'")
    local text = prompt.render("refine", { attempt = 1, max_attempts = 3, target = "the bottleneck \"b\"", keep = "it", stage = "run",
      error = "ERUN: boom", details = "", history = "(first)", dtype = "fp32", kernel_code = "K", entry_point = "ModelNew" })
    expect.match(text, "ERUN: boom")
    local _, err, code = prompt.render("no_such_template", {})
    expect.eq(code, "ENOTFOUND")
    local vars = prompt.variables("diagnose")
    expect.truthy(#vars >= 5, "diagnose has its variables")
  end)
end)

describe("tunables", function()
  local code = "BLOCK_SIZE = 1024\nCHUNK = 1\nx = 5\n\ndef f():\n    k[g](a, BLOCK=64, num_warps=4, num_stages=2)\n" ..
    "configs = [triton.Config({'BLOCK_M': 128}, num_warps=8)]\n"
  it("finds constants, launch keywords and triton.Config entries", function()
    local ts = tunables.find(code)
    local names = {}
    for _, t in ipairs(ts) do names[#names + 1] = t.name .. "=" .. t.value end
    expect.eq(table.concat(names, ","), "BLOCK_SIZE=1024,CHUNK=1,BLOCK=64,num_warps=4,num_stages=2,BLOCK_M=128,num_warps=8")
    local c2 = tunables.apply(code, ts[2], 4)
    expect.match(c2, "CHUNK = 4\n")
    expect.same(tunables.neighbours(ts[4]), { 8, 2 })
    expect.same(tunables.neighbours(ts[1], "down"), { 512, 2048 })
  end)
  it("tuner candidates follow skill hints and skip changes memory says were tried", function()
    local c = tunables.candidates("CHUNK = 2\nBLOCK_SIZE = 8\n", { BLOCK_SIZE = "up" }, 3)
    expect.eq(#c, 3)
    expect.eq(c[1].change.name, "BLOCK_SIZE"); expect.eq(c[1].change.to, 16)
    local tried = {}
    for _, x in ipairs(c) do tried[tunables.signature(x.change)] = true end
    local again = tunables.candidates("CHUNK = 2\nBLOCK_SIZE = 8\n", { BLOCK_SIZE = "up" }, 3,
      function(sig) return tried[sig] end)
    expect.eq(#again, 1, "only the untried one remains")
    expect.eq(tunables.signature(again[1].change), "CHUNK@1=1")
  end)
  it("variants walk the knob moves nearest first and never repeat a source", function()
    local v = tunables.variants("CHUNK = 2\nBLOCK_SIZE = 8\n", 6)
    local knobs = {}
    for i, x in ipairs(v) do knobs[i] = x.knobs end
    expect.same(knobs, { "CHUNK=4 BLOCK_SIZE=8", "CHUNK=1 BLOCK_SIZE=8", "CHUNK=2 BLOCK_SIZE=16",
      "CHUNK=2 BLOCK_SIZE=4", "CHUNK=8 BLOCK_SIZE=8", "CHUNK=4 BLOCK_SIZE=16" })
    expect.eq(#tunables.variants("CHUNK = 1\n", 100), 16, "1 to 65536 by doubling: the start and 16 others")
    expect.eq(#tunables.variants("x = 1\n", 5), 0, "no knob, no variant")
  end)
end)

describe("fingerprint", function()
  it("ignores comments and blank lines, not code", function()
    local a = fingerprint.of("x = 1\n# note\n\ny = 2  \n")
    expect.eq(a, fingerprint.of("x = 1\ny = 2\n"))
    expect.ne(a, fingerprint.of("x = 1\ny = 3\n"))
  end)
end)

describe("metrics and skills on a published trace", function()
  local path = ARTIFACTS .. "/36_RMSNorm/round_1/input_ncu_metrics.json"
  it("summarises Nsight metrics and retrieves memory skills", function()
    local s = kagent.fs.read(path)
    if not s then skip("no published traces at " .. path .. " (set KAGENT_KA_ARTIFACTS)") end
    local r = { metrics = kagent.json.decode(s), time_ms = { median = 4.0 }, kernels = { { name = "_rmsnorm_nchw_kernel", time_ms = 4.0 } } }
    local p = metrics.summarize(r)
    expect.near(p.dram_pct, 82.76, 0.01); expect.near(p.stall_long, 96.13, 0.01); expect.eq(p.kernel_count, 1)
    local text = metrics.grouped_text(r)
    expect.match(text, "%*%*DRAM%*%*"); expect.match(text, "82%.76%%")
    local all = skills.load(kagent.root .. "/skills")
    expect.eq(#all, 24)
    local f = features.extract("@triton.jit\ndef k(x, BLOCK: tl.constexpr):\n  tl.load(x, mask=m)\n  tl.sqrt(x)\n",
      "torch.mean(x ** 2, dim=1)", "bf16")
    expect.eq(f.op_class, "reduction")
    local hits = skills.retrieve(all, p, f, { limit = 5 })
    expect.truthy(#hits >= 2)
    local names = {}
    for _, h in ipairs(hits) do names[h.skill.name] = true end
    expect.truthy(names.vectorization, "vectorization fires below DRAM peak")
    expect.falsy(names.fusion, "no fusion hint without the compulsory bytes")
    -- with the roofline's compulsory bytes (bf16 #36: 7.52 GB) the 11 GB moved show a second pass
    r.roofline = { bytes = 7.52e9 }
    local p2 = metrics.summarize(r)
    expect.near(p2.traffic_ratio, 1.47, 0.01)
    local top = skills.retrieve(all, p2, f, { limit = 1 })
    expect.eq(top[1].skill.name, "fusion", "extra DRAM traffic -> fuse the statistics and apply passes")
    expect.falsy(names.tensor_cores, "no tensor cores for a reduction")
  end)
  it("reads the evaluator's aggregate and never combines kernels itself", function()
    local per = { k1 = { ["dram__throughput.avg.pct_of_peak_sustained_elapsed"] = 10 },
                  k2 = { ["dram__throughput.avg.pct_of_peak_sustained_elapsed"] = 90 } }
    local p = metrics.summarize({ metrics = per, profile = { aggregate = { ["dram__throughput.avg.pct_of_peak_sustained_elapsed"] = 77 } } })
    expect.eq(p.dram_pct, 77, "the evaluator's time-weighted figure")
    expect.eq(p.kernel_count, 2)
    local q = metrics.summarize({ metrics = per })
    expect.eq(q.has_metrics, false, "two kernels and no aggregate: no figure rather than a second rule")
    expect.eq(q.dram_pct, nil)
  end)
  it("CPU mode (no counters) still yields some skills and says there are no counters", function()
    local p = metrics.summarize({ time_ms = { median = 0.1 } })
    expect.eq(p.has_metrics, false)
    expect.match(metrics.grouped_text({}), "no hardware counters")
    local hits = skills.retrieve(skills.load(kagent.root .. "/skills"), p, features.extract("CHUNK = 1\n", "x.mean()", "fp32"))
    expect.truthy(#hits >= 1)
  end)
end)

describe("prompt blocks", function()
  it("the shared prefix of a parent's prompts passes the providers' minimum cacheable length", function()
    local run_lib = require("agents.run")
    local r = { opts = {}, skills = skills.load(kagent.root .. "/skills"), can_profile = true, device_name = "H100",
      gpu_text = "H100", dtype = "bf16", problem_code = assert(kagent.fs.read(kagent.root .. "/examples/problems/36_rmsnorm.py")) }
    run_lib.add_helpers(r)
    -- about 4 characters per token for this text: a lower bound on its tokens in practice
    local function tokens(text) return #text / 4 end
    expect.truthy(tokens(r.system_prompt()) >= 1024, "the system prompt alone (with the skill catalogue): " .. tokens(r.system_prompt()))
    local k = { id = "input", code = assert(kagent.fs.read(kagent.root .. "/examples/kernels/36_rmsnorm.py")),
      result = { time_ms = { median = 4.0, p10 = 3.9, p90 = 4.1, n = 100 } } }
    local block = r.parent_block(k)
    expect.eq(r.parent_block(k), block, "byte-identical for every call about this kernel")
    expect.match(block, "## Problem"); expect.match(block, "## Current kernel")
    expect.truthy(tokens(r.system_prompt() .. block) >= 2048, "system + parent block: " .. tokens(r.system_prompt() .. block))
  end)
end)

describe("evaluator jobs", function()
  it("carry the run's correctness tolerance (--tolerance) to every evaluation", function()
    local run_lib = require("agents.run")
    for _, tol in ipairs({ "strict", "kernelbench-v0.1" }) do
      local r = { opts = { tolerance = tol, job_timeout = 60, metrics = "sol" }, problem_path = "p.py", dtype = "fp32" }
      run_lib.add_helpers(r)
      expect.eq(r.job("code").tolerance, tol)
      expect.eq(r.job(nil, { candidates = { "a", "b" } }).tolerance, tol, "the interleaved comparison too")
    end
  end)
end)

describe("judge", function()
  it("drops repeated directions and tops up from skill rules", function()
    local list = judge.normalize({
      { summary = "Memory bound on DRAM", category = "memory", skill = "coalescing" },
      { summary = "memory bound on dram!", category = "memory", skill = "coalescing" },
      { summary = "" }, "junk",
    })
    expect.eq(#list, 1)
    local all = skills.load(kagent.root .. "/skills")
    local hits = skills.retrieve(all, { has_metrics = false }, { tunables = 1 })
    judge.fill(list, 2, hits, {})
    expect.eq(#list, 2)
    expect.ne(list[2].skill, "coalescing")
    expect.eq(list[2].source, "rules")
  end)
end)
