-- The search driver (agents/search/driver.lua) with a FAKE evaluator pool and small fake policies
-- (tests/fixtures/agent/fake_search.lua): outcomes and the skill record, failures with their real
-- stage, profiles, the baselines' names, the read-only run, and policy loading. State.json and
-- resume are in agent_search_resume_spec.lua. No Python, no LLM.
package.path = kagent.root .. "/?.lua;" .. kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs = kagent.fs
local search = require("agents.search.driver")
local run_lib = require("agents.run")
local policy = require("agents.search.policy")
local fake = require("fake_search")

local fake_run, fake_policy = fake.run, fake.policy

describe("search driver", function()
  it("classifies outcomes, credits a duplicate of a winner to its skill, and fails closed", function()
    local dir = spec.tmpdir("search-outcomes")
    local run = fake_run(dir, { rounds = 1 })
    local pol = fake_policy(function(parent, r)
      local out = {}
      for i, code in ipairs({ "TIME=0.5\n", "TIME=0.5\n#same\n", "STAGE=timing TIME=0.01\n", "RAISE", "TIME=1.0\n" }) do
        out[i] = { summary = "d" .. i, skill = i <= 2 and "winner" or ("s" .. i), category = "c", code = code }
      end
      return out
    end)
    local st = assert(search.start(run, nil))
    local reason = search.search(run, pol, st)
    expect.eq(reason, nil, "ran its one round")
    local by = {}
    for _, a in ipairs(st.attempts) do by[a.worker] = a end
    expect.eq(by[1].outcome, "improved")
    expect.eq(by[2].outcome, "duplicate", "same source (comments aside): not evaluated again, not new")
    expect.truthy(fs.exists(run.rd:path("rounds/round_1/w2/duplicate.json")), "the skipped evaluation is traced")
    -- a duplicate names the kernel it repeats, never that kernel's win as its own
    expect.match(by[2].promotion, "^duplicate of r1w1: the same kernel")
    expect.falsy(by[2].promotion:find("interleaved", 1, true), "no promotion text: " .. by[2].promotion)
    expect.match(by[5].promotion, "^duplicate of its parent input: the same kernel")
    expect.eq(by[3].outcome, "failed")
    expect.eq(by[3].stage, "timing", "an untrusted figure is a failure with its real stage, never ranked")
    expect.eq(by[4].outcome, "failed")
    expect.eq(by[4].stage, "policy", "a policy error is this worker's failure, not the run's")
    expect.eq(by[5].outcome, "duplicate", "the parent's own kernel")
    expect.eq(st.best.id, "r1w1")
    expect.eq(#st.beam, 1)
    local rec = run.mem:skill_stats({ op_class = "reduction", bottleneck = "c" })
    expect.eq(rec.winner.attempts, 2)
    expect.eq(rec.winner.successes, 2, "the duplicate of the winning kernel counts as a success of its skill")
    expect.eq(rec.s3.successes, 0)
    run.db:close()
  end)

  it("profiles the kernels it keeps and never a candidate that loses the gate", function()
    local dir = spec.tmpdir("search-profile")
    local run = fake_run(dir, { rounds = 1, beam = 1 })
    run.can_profile = true
    -- every job the FAKE pool gets, by op and candidate; its profile adds counters
    local ops = {}
    local pool = run.pool
    for _, op in ipairs({ "evaluate", "benchmark", "profile" }) do
      local f = pool[op]
      pool[op] = function(self, job)
        ops[#ops + 1] = { op = op, code = job.candidate, metric_set = job.profile and job.profile.metric_set }
        local r = f(self, job)
        if op ~= "benchmark" and r.ok then r.metrics = { k = { ["sm__throughput.avg.pct_of_peak_sustained_elapsed"] = 50 } } end
        return r
      end
    end
    local pol = fake_policy(function()
      return { { summary = "win", skill = "w", category = "c", code = "TIME=0.5\n" },
        { summary = "lose", skill = "l", category = "c", code = "TIME=0.9\n" } }
    end)
    local st = assert(search.start(run))
    search.search(run, pol, st)
    local function ops_of(code)
      local out = {}
      for _, o in ipairs(ops) do if o.code == code then out[#out + 1] = o.op end end
      return table.concat(out, ",")
    end
    expect.eq(st.best.id, "r1w1")
    expect.eq(ops_of("TIME=0.9\n"), "benchmark", "the loser was timed, never profiled")
    expect.eq(ops_of("TIME=0.5\n"), "benchmark,profile", "the kept kernel was profiled once")
    expect.truthy(st.best.result.metrics, "the kept kernel carries its counters")
    expect.eq(st.best.result.time_ms.median, 0.5, "its timing is the gate's")
    -- a policy that reads every child's counters declares it, and gets full evaluations
    ops = {}
    local run2 = fake_run(spec.tmpdir("search-profile-all"), { rounds = 1, beam = 1 })
    run2.can_profile, run2.profile_children = true, true
    run2.pool = pool
    local st2 = assert(search.start(run2))
    search.search(run2, pol, st2)
    expect.eq(ops_of("TIME=0.9\n"), "evaluate")
    run.db:close(); run2.db:close()
  end)

  it("records an attempt whose LLM call failed as llm_error, and learns nothing from it", function()
    local dir = spec.tmpdir("search-llm-error")
    local run = fake_run(dir, { rounds = 1 })
    local pol = fake_policy(function()
      return { { summary = "d1", skill = "winner", category = "c", code = "TIME=0.5\n" },
        { summary = "d2", skill = "down", category = "c", code = "LLM" }, { summary = "d3", skill = "cut", category = "c", code = "REPAIR" } }
    end)
    local expand = pol.expand
    pol.expand = function(parent, d, r, w)
      if d.code == "LLM" then return { stage = "llm", error = "ECONNECT: refused", llm_code = "ECONNECT" } end
      -- a kernel that failed, whose repair call then failed: not the kernel's verdict either
      if d.code == "REPAIR" then
        return { code = "x", result = { ok = false, stage = "correctness", error = "EMISMATCH: off" },
          llm_code = "ETIMEDOUT", llm_error = "ETIMEDOUT: stalled" }
      end
      return expand(parent, d, r, w)
    end
    local st = assert(search.start(run))
    search.search(run, pol, st)
    local by = {}
    for _, a in ipairs(st.attempts) do by[a.worker] = a end
    expect.eq(by[1].outcome, "improved")
    expect.eq(by[2].outcome, "llm_error")
    expect.eq(by[2].llm_code, "ECONNECT")
    expect.eq(by[3].outcome, "llm_error")
    expect.eq(by[3].llm_code, "ETIMEDOUT")
    local rows = run.db:query("SELECT id, stage, error_signature, correct, plan_signature FROM attempts"
      .. " WHERE skill IN ('down', 'cut') ORDER BY id")
    expect.eq(#rows, 2)
    for _, row in ipairs(rows) do
      expect.eq(row.stage, "llm_error")
      expect.eq(row.correct, nil, "no verdict on a kernel")
      expect.eq(run.db:query("SELECT count(*) AS n FROM reflexions WHERE attempt_id = ?", { row.id })[1].n, 0)
    end
    expect.eq(rows[1].error_signature, "ECONNECT")
    local rec = run.mem:skill_stats({ op_class = "reduction", bottleneck = "c" })
    expect.eq(rec.down, nil, "no skill outcome")
    expect.eq(rec.cut, nil)
    expect.eq(run.db:query("SELECT count(*) AS n FROM lessons WHERE text LIKE '%down%' OR text LIKE '%cut%'")[1].n, 0)
    expect.truthy(rows[1].plan_signature, "the attempt keeps its plan")
    expect.eq(run.mem:plan_tried(st.input.fingerprint, "down", rows[1].plan_signature), nil,
      "a plan the LLM never answered is not 'tried'")
    run.db:close()
  end)

  it("keeps the baselines the evaluator's ready line names, in the state and in summary.json", function()
    local dir = spec.tmpdir("search-baseline-names")
    local run = fake_run(dir, { rounds = 1 })
    -- a FAKE ready line naming a baseline of its own; the FAKE pool times it at 2 ms
    run.devices = { { baselines = { "eager", "compile", "planted" }, reported_baselines = { "eager", "planted" } } }
    local inner = run.pool
    run.pool = setmetatable({}, { __index = function(_, op)
      return function(_, job)
        local r = inner[op](inner, job)
        if r.ok then r.planted_ms = 2.0 end
        return r
      end
    end })
    local st = assert(search.start(run, nil))
    expect.same(st.baselines, { eager_ms = 1.0, planted_ms = 2.0 }, "the start's: the reported ones")
    search.search(run, fake_policy(function() return { { summary = "d", skill = "k", category = "c", code = "TIME=0.5\n" } } end), st)
    local s = search.finish(run, st, nil)
    expect.eq(s.verified, true)
    expect.eq(s.baselines.planted_ms, 2.0)
    expect.near(s.speedup_vs_planted, 2.0 / 0.5, 1e-9)
    expect.eq(s.baselines.compile_max_autotune_ms, nil, "no figure for a baseline the evaluator does not name")
    run.db:close()
  end)

  it("stops when the policy has nothing to try, with its reason", function()
    local dir = spec.tmpdir("search-none")
    local run = fake_run(dir, { rounds = 3 })
    local pol = fake_policy(function() return {}, "every knob tried" end)
    local st = assert(search.start(run, nil))
    expect.eq(search.search(run, pol, st), "every knob tried")
    expect.eq(st.round, 0)
    run.db:close()
  end)
end)

describe("policies and the run", function()
  it("loads shipped policies by name and says what a bad one lacks", function()
    for _, name in ipairs({ "beam", "greedy", "skill", "tune" }) do
      local p, err = policy.load(name)
      expect.truthy(p, err)
      expect.eq(p.name, name)
    end
    expect.eq(policy.load("tune").llm, false)
    local _, err = policy.load("no_such_policy")
    expect.match(err, "no policy 'no_such_policy'")
    local dir = spec.tmpdir("policy-bad")
    fs.write(dir .. "/p.lua", "return { parents = function() end }")
    local _, err2 = policy.load(dir .. "/p.lua")
    expect.match(err2, "lacks the required hook%(s%) directions, keep")
    local ex, err3 = policy.load(kagent.root .. "/examples/policies/rule_sweep.lua")
    expect.truthy(ex, err3)
  end)

  it("is read-only once set up", function()
    local r = run_lib.freeze({ opts = {} })
    expect.errors(function() r.beam = {} end, "read%-only")
    expect.eq(type(r.opts), "table")
  end)

  it("shipped policy files stay small", function()
    for _, name in ipairs({ "beam", "greedy", "skill", "tune" }) do
      local n = 0
      for _ in fs.read(policy.path_of(name)):gmatch("\n") do n = n + 1 end
      expect.lt(n, 100, name .. ".lua lines")
    end
    local n = 0
    for _ in fs.read(kagent.root .. "/examples/policies/rule_sweep.lua"):gmatch("\n") do n = n + 1 end
    expect.le(n, 40, "the example policy")
  end)
end)
