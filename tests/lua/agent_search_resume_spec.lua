-- The search driver (agents/search/driver.lua) across processes, with a FAKE evaluator pool and
-- small fake policies (tests/fixtures/agent/fake_search.lua): state.json after each round and the
-- resume from it, a corrupt state refused, and a second run that learns from the first's
-- memory. No Python, no LLM.
package.path = kagent.root .. "/?.lua;" .. kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs, json = kagent.fs, kagent.json
local search = require("agents.search.driver")
local policy = require("agents.search.policy")
local rundir = require("agents.run.rundir")
local memory = require("agents.run.memory")
local state_file = require("agents.search.state")
local fake = require("fake_search")

local fake_run, fake_policy = fake.run, fake.policy

describe("search driver", function()
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

end)
