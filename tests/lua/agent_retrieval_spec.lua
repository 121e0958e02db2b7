-- Skill retrieval of the skill policy (agents/lib/retrieval.lua, buckets.lua), the learned
-- ranking (agents/lib/skills.lua) and the planner's checks and memory de-duplication
-- (agents/roles/planner.lua). The 40 published input profiles of KernelAgent's traces are read
-- from KAGENT_KA_ARTIFACTS (default ../shared/data/ka-artifacts beside the checkout); those
-- cases are skipped, saying so, where the folder is absent.
package.path = kagent.root .. "/?.lua;" .. package.path
local fs, json = kagent.fs, kagent.json
local retrieval = require("agents.lib.retrieval")
local metrics = require("agents.lib.metrics")
local features = require("agents.lib.features")
local skills_lib = require("agents.lib.skills")
local memory = require("agents.run.memory")
local planner = require("agents.roles.planner")
local run_lib = require("agents.run")

local ARTIFACTS = os.getenv("KAGENT_KA_ARTIFACTS") or (kagent.root .. "/../shared/data/ka-artifacts")
local SKILLS = skills_lib.load(kagent.root .. "/skills")
local PROBLEMS = { ["4"] = "04_Matrix_vector_multiplication", ["36"] = "36_RMSNorm", ["43"] = "43_Max_Pooling_3D",
  ["77"] = "77_conv_transposed_3D_square_input_square_kernel___padded____dilated____strided__",
  ["82"] = "82_conv_depthwise_2D_square_input_square_kernel" }

local function need_artifacts()
  if not fs.is_dir(ARTIFACTS) then
    skip("KernelAgent's published traces are not at " .. ARTIFACTS .. " (set KAGENT_KA_ARTIFACTS)")
  end
end

-- decide(problem id, round, roofline) -> the retrieval decision on that round's input profile.
-- Code features come from the problem's input kernel (the rounds' kernels are not published).
local function decide(id, round, roofline)
  local dir = ARTIFACTS .. "/" .. PROBLEMS[id]
  local per = json.decode(assert(fs.read(string.format("%s/round_%d/input_ncu_metrics.json", dir, round))))
  local n = 0
  for _ in pairs(per.metrics) do n = n + 1 end
  expect.eq(n, 1, "one kernel per published profile (its own aggregate)")
  local p = metrics.summarize({ metrics = per, roofline = roofline })
  local f = features.extract(fs.read(dir .. "/input_kernel.py"), fs.read(dir .. "/problem.py"), "bf16")
  return retrieval.retrieve(SKILLS, p, f, {}), p
end

local function has(list, x)
  for _, v in ipairs(list) do if v == x or (type(v) == "table" and v.field == x) then return true end end
  return false
end

describe("retrieval on KernelAgent's 40 published input profiles", function()
  it("gives every profile a bucket, a tier and allowed skills that exist", function()
    need_artifacts()
    local names = {}
    for _, s in ipairs(SKILLS) do names[s.name] = true end
    local count = 0
    for id in pairs(PROBLEMS) do
      for round = 1, 8 do
        local d = decide(id, round)
        local at = id .. " round " .. round
        expect.truthy(type(d.bucket) == "string" and d.bucket ~= "unprofiled", at .. ": a bucket from the counters")
        expect.truthy(d.tier == "high" or d.tier == "medium" or d.tier == "low", at .. ": tier " .. tostring(d.tier))
        expect.truthy(#d.allowed >= 2, at .. ": allowed skills")
        for _, n in ipairs(d.allowed) do expect.truthy(names[n], at .. ": skill " .. n .. " exists") end
        expect.eq(#d.ranked, #d.allowed, at .. ": every allowed skill ranked")
        expect.truthy(#d.evidence >= 1, at .. ": evidence cited")
        count = count + 1
      end
    end
    expect.eq(count, 40)
  end)

  -- Worked by hand from the metric values (see each reason); the rules must agree.
  local EXPECT = {
    -- DRAM 82.8% trips the priority rule; 96% of warps wait on long scoreboards (memory)
    { "36", 1, "memory_bandwidth", "low", "reduction", { "fusion", "vectorization" }, signal = "stall_long" },
    -- the single-pass kernel: DRAM 86.6%, still bandwidth, occupancy 30% and stalls as signals
    { "36", 2, "memory_bandwidth", "low", "reduction", { "fusion" }, signal = "stall_long" },
    -- matrix-vector product: 254 registers per thread cap occupancy at 6%; DRAM only 18.5%
    { "4", 1, "register_pressure", "high", "streaming", { "live_ranges", "less_unrolling" }, signal = "regs" },
    -- 31 registers now; DRAM 25.8% with 60% long-scoreboard stalls: too few loads in flight
    { "4", 2, "memory_latency", "high", "streaming", { "memory_parallelism", "ilp" } },
    -- 168 registers, occupancy 6%: still register pressure
    { "4", 6, "register_pressure", "high", "streaming", { "live_ranges" } },
    -- max pool: SM 90.6% against DRAM 30.6% (index arithmetic per element): compute, little headroom
    { "43", 1, "compute", "low", "stencil", { "address_calc", "reduce_instructions" } },
    -- L1 at 99.8% with 24.9% of each sector used: L1-saturated, badly coalesced gathers
    { "43", 2, "l1_saturated", "low", "stencil", { "coalescing", "smem_tiling" }, signal = "coalescing" },
    -- transposed 3-D convolution: a GEMM-shaped reduction with the tensor pipe at 1.9%
    { "77", 1, "gemm_tiling", "high", "reuse", { "tensor_cores", "smem_tiling" } },
    -- 252 registers as well, but tiling the GEMM comes first (it changes the register picture)
    { "77", 6, "gemm_tiling", "high", "reuse", { "tensor_cores" }, signal = "regs" },
    -- depthwise convolution: SM 80.7% vs DRAM 16.6%: compute-bound stencil
    { "82", 1, "compute", "low", "stencil", { "reduce_instructions", "address_calc" } },
    -- L1 at 99.5%, 24% sector use: L1-saturated
    { "82", 3, "l1_saturated", "low", "stencil", { "coalescing", "register_blocking" }, signal = "coalescing" },
  }
  it("matches the hand-worked bucket, tier, structure and skills on 11 of them", function()
    need_artifacts()
    for _, e in ipairs(EXPECT) do
      local d = decide(e[1], e[2])
      local at = "#" .. e[1] .. " round " .. e[2]
      expect.eq(d.bucket, e[3], at .. " bucket")
      expect.eq(d.tier, e[4], at .. " tier")
      expect.eq(d.structure, e[5], at .. " structure")
      for _, s in ipairs(e[6]) do expect.truthy(has(d.allowed, s), at .. " allows " .. s) end
      if e.signal then expect.truthy(has(d.signals, e.signal), at .. " signals " .. e.signal) end
    end
  end)

  it("puts fusion first on #36 round 1 once the compulsory bytes show the second pass", function()
    need_artifacts()
    -- bf16 #36 moves 7.52 GB compulsory; the two-pass kernel reads x twice (11 GB in all)
    local d, p = decide("36", 1, { bytes = 7.52e9 })
    expect.near(p.traffic_ratio, 1.47, 0.01)
    expect.eq(d.ranked[1].skill, "fusion")
    expect.match(d.why, "bucket memory_bandwidth")
  end)
end)

describe("learned ranking", function()
  local function names(d) local out = {} for i, r in ipairs(d.ranked) do out[i] = r.skill end return out end
  local function rank_of(d, skill) for i, r in ipairs(d.ranked) do if r.skill == skill then return i end end end
  local p = { has_metrics = true, dram_pct = 85, stall_long = 70 }
  local f = { op_class = "reduction", dtype = "bf16", n_kernels = 1 }

  it("sinks a skill that keeps failing and lifts one that worked", function()
    local fresh = retrieval.retrieve(SKILLS, p, f, {})
    local top = fresh.ranked[1].skill
    local failed = retrieval.retrieve(SKILLS, p, f, { [top] = { attempts = 10, successes = 0 } })
    expect.eq(rank_of(failed, top), #failed.ranked, top .. " with 0 of 10 ranks last: " .. table.concat(names(failed), ","))
    local last = fresh.ranked[#fresh.ranked].skill
    local worked = retrieval.retrieve(SKILLS, p, f, { [last] = { attempts = 1, successes = 1, median_gain = 1.3 } })
    expect.eq(rank_of(worked, last), 1, last .. " after one success: " .. table.concat(names(worked), ","))
  end)

  it("ranks, in a second run, a skill that succeeded in the first run higher (memory on disk)", function()
    local dir = spec.tmpdir("learn")
    local info = { problem = "p", problem_hash = "h", gpu = "G", policy = "skill" }
    local db = assert(kagent.mem.open(dir .. "/m.db"))
    local m1 = memory.open(db, info)
    local stats = function(bucket) return m1:skill_stats({ op_class = "reduction", bottleneck = bucket }) end
    local first = retrieval.retrieve(SKILLS, p, f, stats)
    local chosen = first.ranked[#first.ranked].skill
    -- the first run: its attempt with the lowest-ranked skill beat the parent; another skill failed
    m1:skill_outcome(chosen, { bottleneck = first.bucket, op_class = "reduction", success = true, gain = 1.4 })
    m1:skill_outcome(first.ranked[1].skill, { bottleneck = first.bucket, op_class = "reduction", success = false, gain = 0.9 })
    db:close()
    local db2 = assert(kagent.mem.open(dir .. "/m.db"))
    local m2 = memory.open(db2, info)
    local second = retrieval.retrieve(SKILLS, p, f, function(bucket) return m2:skill_stats({ op_class = "reduction", bottleneck = bucket }) end)
    expect.lt(rank_of(second, chosen), rank_of(first, chosen), chosen .. " ranks higher in the second run")
    expect.match(second.ranked[rank_of(second, chosen)].why, "1/1 succeeded")
    local table_rows = memory.skill_table(db2, { gpu = "G" })
    expect.eq(#table_rows, 2, "the learned table has both skills")
    db2:close()
  end)
end)

describe("planner", function()
  local decision = { bucket = "memory_bandwidth", allowed = { "fusion", "vectorization" },
    evidence = { { field = "dram_pct", metric = "dram__throughput.avg.pct_of_peak_sustained_elapsed", value = 85 } },
    ranked = { { skill = "fusion", why = "untried" }, { skill = "vectorization", why = "untried" } }, why = "bucket memory_bandwidth" }
  local parent = { id = "input", fingerprint = "FP", profile = { dram_pct = 85, time_ms = 2 }, result = {} }

  it("checks the skill, the metric evidence and a concrete change for a re-tried skill", function()
    local known = planner.known_metrics(parent)
    local ev = { { metric = "dram__throughput.avg.pct_of_peak_sustained_elapsed", value = 85 } }
    expect.truthy(planner.check({ skill = "fusion", evidence = ev }, decision, known, {}))
    local ok, why = planner.check({ skill = "tensor_cores", evidence = ev }, decision, known, {})
    expect.falsy(ok); expect.match(why, "not allowed")
    ok, why = planner.check({ skill = "fusion", evidence = { { metric = "made_up_metric", value = 1 } } }, decision, known, {})
    expect.falsy(ok); expect.match(why, "no evidence")
    ok, why = planner.check({ skill = "fusion", evidence = ev, change = "" }, decision, known, { fusion = true })
    expect.falsy(ok); expect.match(why, "concrete change")
  end)

  it("keys plans by skill and parameters, not by wording", function()
    expect.eq(planner.signature({ skill = "fusion", params = { BLOCK = 1024, rows = 4 }, change = "words" }),
      planner.signature({ skill = "fusion", params = { rows = 4, BLOCK = 1024 }, change = "other words" }))
    expect.eq(planner.signature({ skill = "fusion", change = "Fuse the two passes" }),
      planner.signature({ skill = "fusion", change = "the passes: fuse two" }))
    expect.ne(planner.signature({ skill = "fusion", params = { rows = 4 } }), planner.signature({ skill = "fusion", params = { rows = 8 } }))
  end)

  it("refuses a plan memory has seen on this kernel, asks again, and fills from the ranked skills", function()
    local dir = spec.tmpdir("plan-dedup")
    local db = assert(kagent.mem.open(dir .. "/m.db"))
    local m = memory.open(db, { problem = "p", problem_hash = "h", gpu = "G", policy = "skill" })
    local input_id = m:add_attempt({ round = 0, role = "input", fingerprint = "FP", stage = "done" })
    local plan = { skill = "fusion", params = { passes = 1 }, plan = "one pass", change = "single pass over x",
      evidence = { { metric = "dram_pct", value = 85 } } }
    m:add_attempt({ round = 1, parent_id = input_id, role = "optimizer", skill = "fusion",
      plan_signature = planner.signature(plan), stage = "slower" })
    -- a FAKE chat: the planner answers the same plan every time it is asked
    local asked = {}
    local t = { llm = {}, mem = m, skills = SKILLS, render = function(name, vars) asked[#asked + 1] = vars.refused or "-"; return name end,
      chat = function() return { text = "```json\n" .. json.encode({ plans = { plan } }) .. "\n```" } end,
      parent_block = function() return "P" end, full_prompt = run_lib.full_prompt,
      reply_stats = require("agents.run.reply_stats").new() }
    t.ask_json = function(q) return require("agents.run.ask").json(t, q) end
    local run = run_lib.freeze(t)
    local plans, rec = planner.plans(run, parent, 2, decision, { tried = m:skills_tried("FP") })
    expect.eq(#asked, 2, "asked once more after the refusal")
    expect.match(asked[2], "fusion:passes=1", "the second prompt names the refused plan")
    expect.eq(#rec.refused, 2, "refused both times")
    expect.match(rec.refused[1].why, "tried before %(attempt #%d+, slower%)")
    expect.eq(#plans, 1, "fusion is used up; the gap is filled by rule")
    expect.eq(plans[1].skill, "vectorization")
    expect.eq(plans[1].source, "rules")
    db:close()
  end)
end)
