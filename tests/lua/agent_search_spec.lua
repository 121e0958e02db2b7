-- The search driver (agents/search/driver.lua) with a FAKE evaluator pool and small fake policies:
-- outcomes and the skill record, failures with their real stage, state.json and resume, the
-- read-only run, and policy loading. No Python, no LLM.
package.path = kagent.root .. "/?.lua;" .. package.path
local fs, json = kagent.fs, kagent.json
local search = require("agents.search.driver")
local run_lib = require("agents.run")
local policy = require("agents.search.policy")
local rundir = require("agents.run.rundir")
local memory = require("agents.run.memory")
local progress = require("agents.run.progress")
local promotion = require("agents.search.promotion")
local state_file = require("agents.search.state")

-- A FAKE pool: a candidate's source says what the evaluator returns. "TIME=0.5" verifies with a
-- median of 0.5 ms (tight spread); "STAGE=timing" fails at that stage.
local function fake_result(code)
  local stage = code:match("STAGE=(%w+)")
  if stage then return { ok = false, stage = stage, error = "EFAKE: failed at " .. stage } end
  local t = tonumber(code:match("TIME=([%d%.]+)"))
  return { ok = true, stage = "done", fingerprint = "fp:" .. code:gsub("%s+", ""),
    time_ms = { median = t, p10 = t * 0.999, p90 = t * 1.001, n = 100 }, eager_ms = 1.0, compile_ms = 0.9 }
end

local function fake_pool()
  local p = { jobs = 0 }
  function p:evaluate(job) self.jobs = self.jobs + 1; return fake_result(job.candidate) end
  function p:benchmark(job) self.jobs = self.jobs + 1; return fake_result(job.candidate) end
  function p:profile(job) return fake_result(job.candidate) end
  -- interleaved timing: each candidate's TIME, its speedup over the first
  function p:compare(job)
    self.jobs = self.jobs + 1
    local out, t1 = {}, nil
    for i, code in ipairs(job.candidates) do
      local t = tonumber(code:match("TIME=([%d%.]+)"))
      t1 = t1 or t
      out[i] = { time_ms = { median = t }, speedup = { median = t1 / t, cv = 0.001, pairs = 4 } }
    end
    return { ok = true, stage = "done", candidates = out }
  end
  return p
end

local sink = { write = function() end, flush = function() end }

local function fake_run(dir, opts, rd)
  local o = { rounds = 2, plateau = 3, sol_stop = 95, min_gain = 1, refine = 0, directions = 2, beam = 1,
    kernel = dir .. "/input.py", policy = "fake", out = dir .. "/runs", metrics = "sol", job_timeout = 60 }
  for k, v in pairs(opts or {}) do o[k] = v end
  fs.write(o.kernel, "TIME=1.0\n")
  local db = assert(kagent.mem.open(dir .. "/mem.db"))
  local r = { opts = o, problem_path = dir .. "/problem.py", problem_code = "x.mean()", dtype = "fp32",
    pool = fake_pool(), device_name = "fake", gpu_text = "FAKE", can_profile = false, db = db, t0 = 0,
    rd = rd or assert(rundir.open(o.out, "run1")), mode = "tuner", op_class = "reduction", skills = {},
    usage = function() return { calls = 0, input_tokens = 0, output_tokens = 0, cache_read_tokens = 0,
      cache_write_tokens = 0, cost_usd = 0, tokens = 0 } end }
  r.mem = memory.open(db, { problem = r.problem_path, problem_hash = "ph", gpu = "fake", policy = "fake" })
  r.progress = progress.new({ out = sink, rounds = o.rounds })
  run_lib.add_helpers(r)
  return r
end

-- A fake policy: one parent, the directions given, each direction's `code` is its kernel.
local function fake_policy(directions)
  return assert(policy.check({
    llm = false,
    parents = function(beam) return { beam[1] } end,
    directions = directions,
    expand = function(parent, d, run, w)
      if d.code == "RAISE" then error("boom") end
      local r, cached = run.evaluate(d.code)
      return { code = d.code, result = r, cached = cached }
    end,
    keep = function(beam, children, run) return promotion.keep_best(run, beam, children) end,
  }, "fake.lua"))
end

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

  it("saves state after each round and resumes where it stopped", function()
    local dir = spec.tmpdir("search-resume")
    local codes, n = { "TIME=0.8\n", "TIME=0.6\n" }, 0
    local pol = fake_policy(function(parent)
      n = n + 1
      return { { summary = "round " .. n, skill = "k", category = "c", code = codes[n] } }
    end)
    local run = fake_run(dir, { rounds = 1 })
    local st = assert(search.start(run, nil))
    search.search(run, pol, st)
    run.db:close()
    local text = fs.read(run.rd:path("state.json"))
    local saved = assert(state_file.decode(text))
    expect.eq(saved.round, 1)
    expect.eq(saved.best.id, "r1w1")
    -- a new process: the run folder and memory come back from state.json
    local run2 = fake_run(dir, { rounds = 2 }, assert(rundir.open(run.rd.dir)))
    run2.mem = assert(memory.resume(run2.db, saved.mem_run_id, run2.mem.info))
    local st2 = assert(state_file.restore(run2.rd.dir, saved))
    expect.eq(st2.best.code, "TIME=0.8\n", "kernels come back from their files")
    search.search(run2, pol, st2)
    expect.eq(st2.round, 2)
    expect.eq(st2.best.id, "r2w1")
    expect.eq(#st2.attempts, 2, "the attempts of both processes")
    expect.eq(json.decode(fs.read(run2.rd:path("state.json"))).round, 2)
    local s = search.finish(run2, st2, nil)
    expect.eq(s.rounds, 2)
    expect.eq(s.verified, true)
    expect.near(s.speedup_vs_input, 1.0 / 0.6, 1e-6)

    -- a third process resumes from the state saved after round 1 (as after a kill -9 in round 2):
    -- round 2's attempts are superseded, their folder moved aside, and round 2 is redone
    local run3 = fake_run(dir, { rounds = 2 }, assert(rundir.open(run.rd.dir)))
    run2.mem:finish("done", {})
    run3.mem = assert(memory.resume(run3.db, run2.mem.run_id, run3.mem.info))
    local st3 = assert(state_file.restore(run3.rd.dir, assert(state_file.decode(text))))
    n = 1
    expect.eq(search.supersede(run3, st3), 1, "round 2's one attempt")
    local old = run3.db:query("SELECT stage, source_path FROM attempts WHERE run_id = ? AND round = 2", { run3.mem.run_id })
    expect.eq(#old, 1)
    expect.eq(old[1].stage, "superseded")
    expect.truthy(old[1].source_path:find("/superseded/", 1, true) and fs.exists(old[1].source_path),
      "its trace moved, and its row points there: " .. tostring(old[1].source_path))
    expect.falsy(fs.exists(run3.rd:path("rounds/round_2")), "round 2's folder moved aside")
    expect.eq(run3.db:query("SELECT count(*) AS n FROM skill_outcomes o JOIN attempts a ON a.id = o.attempt_id"
      .. " WHERE a.stage = 'superseded'")[1].n, 0, "nothing learned from a superseded attempt stays")
    search.search(run3, pol, st3)
    local s3 = search.finish(run3, st3, nil)
    local live = run3.db:query("SELECT count(*) AS n FROM attempts WHERE run_id = ? AND role NOT IN ('input', 'repair')"
      .. " AND stage != 'superseded'", { run3.mem.run_id })[1].n
    expect.eq(live, s3.attempts, "the database and summary.json count the same attempts")
    expect.eq(s3.attempts, 2)
    run2.db:close()
    run3.db:close()
  end)

  it("a resumed run does not evaluate again a source the interrupted process evaluated", function()
    local dir = spec.tmpdir("search-resume-cache")
    -- round 1: a winner and a loser; the redone round 2 writes the loser again
    local rounds = { { "TIME=0.8\n", "TIME=0.9\n" }, { "TIME=0.9\n" } }
    local n = 0
    local pol = fake_policy(function()
      n = n + 1
      local out = {}
      for i, code in ipairs(rounds[n]) do out[i] = { summary = "d" .. i, skill = "k", category = "c", code = code } end
      return out
    end)
    local run = fake_run(dir, { rounds = 1 })
    local st = assert(search.start(run, nil))
    search.search(run, pol, st)
    run.db:close()
    local saved = assert(state_file.decode(fs.read(run.rd:path("state.json"))))
    -- a new process resumes from the state saved after round 1
    local run2 = fake_run(dir, { rounds = 2 }, assert(rundir.open(run.rd.dir)))
    run2.mem = assert(memory.resume(run2.db, saved.mem_run_id, run2.mem.info))
    local st2 = assert(state_file.restore(run2.rd.dir, saved))
    search.supersede(run2, st2)
    search.search(run2, pol, st2)
    expect.eq(st2.round, 2)
    expect.eq(run2.pool.jobs, 0, "round 1's loser is not evaluated again")
    expect.truthy(fs.exists(run2.rd:path("rounds/round_2/w1/duplicate.json")), "the resumed round traces it as a duplicate")
    local a = st2.attempts[#st2.attempts]
    expect.eq(a.outcome, "duplicate")
    expect.eq(a.duplicate_of, "r1w2")
    run2.db:close()
  end)

  it("a corrupt or incomplete state.json is refused with the reason", function()
    expect.falsy(state_file.decode("{not json"))
    local _, why = state_file.decode("[1, 2]")
    expect.eq(why, "not a JSON object")
    _, why = state_file.decode(json.encode({ version = 99, opts = {}, mem_run_id = 1 }))
    expect.truthy(why:find("version 99", 1, true), why)
    _, why = state_file.decode(json.encode({ version = 3, opts = {}, mem_run_id = 1, round = 1, input = { path = "x" } }))
    expect.eq(why, "the search state is incomplete")
    local st = assert(state_file.decode('{"version": 3, "opts": {"rounds": 2}, "mem_run_id": 4, "baselines": {"compile_ms": null}}'))
    expect.eq(st.baselines.compile_ms, nil, "a null reads as nil (no arithmetic on json.null)")
  end)

  it("a tuner run again from the same kernel finds the setting an earlier run improved with", function()
    local dir = spec.tmpdir("search-tune-again")
    -- the FAKE pool's time is the kernel's BLOCK_SIZE's: 256 is fastest, 64 slowest
    local ms = { [64] = 1.4, [128] = 1.0, [256] = 0.6, [512] = 0.9 }
    local function time_of(code) return ms[tonumber(code:match("BLOCK_SIZE = (%d+)"))] end
    local function tuner_run(name)
      local run = fake_run(dir, { rounds = 1, tune_candidates = 4, policy = "tune" },
        assert(rundir.open(dir .. "/runs", name)))
      fs.write(run.opts.kernel, "BLOCK_SIZE = 128\n")
      local pool = run.pool
      local function timed(code)
        local t = time_of(code)
        return { ok = true, stage = "done", fingerprint = "fp:" .. code:gsub("%s+", ""),
          time_ms = { median = t, p10 = t * 0.999, p90 = t * 1.001, n = 100 }, eager_ms = 1.0, compile_ms = 0.9 }
      end
      function pool:evaluate(job) self.jobs = self.jobs + 1; return timed(job.candidate) end
      function pool:benchmark(job) self.jobs = self.jobs + 1; return timed(job.candidate) end
      function pool:profile(job) return timed(job.candidate) end
      function pool:compare(job)
        local out, t1 = {}, time_of(job.candidates[1])
        for i, code in ipairs(job.candidates) do
          out[i] = { time_ms = { median = time_of(code) }, speedup = { median = t1 / time_of(code), cv = 0.001, pairs = 4 } }
        end
        return { ok = true, stage = "done", candidates = out }
      end
      local st = assert(search.start(run, nil))
      local reason = search.search(run, assert(policy.load("tune")), st)
      run.db:close()
      return st, reason
    end
    local first = tuner_run("first")
    expect.match(first.best.code, "BLOCK_SIZE = 256")
    -- the same kernel, the same database: 64 (slower then) is not tried again, 256 (the gain) is
    local again, reason = tuner_run("again")
    expect.eq(reason, nil, "the run had a setting to try: " .. tostring(reason))
    expect.eq(#again.attempts, 1, "only the earlier gain is tried again")
    expect.eq(again.attempts[1].time_ms, ms[256])
    expect.eq(again.attempts[1].outcome, "improved")
    expect.match(again.best.code, "BLOCK_SIZE = 256", "the second run ends where the first did")
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
