-- --resume for every policy, on the CPU against the FAKE LLM server
-- (tests/fixtures/fake_llm/server.py): each policy runs one round, then a second process resumes
-- the run folder for a second round, with the same memory run and the attempts of both. The
-- example policy (examples/policies/rule_sweep.lua) runs end to end the same way.
-- Candidates are pure PyTorch (CPU mode); needs a python with torch (KAGENT_PYTHON).
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs, json, proc = kagent.fs, kagent.json, kagent.proc
local fake = require("fake_session")
local cpu = fake.cpu()
local root, fx, problem = kagent.root, cpu.fx, cpu.problem

local fenced = fake.fenced
local EV = { { metric = "time_ms", value = 1, interpretation = "slow" } }

-- every role of every shipped policy has an answer; each rewrite is the fast kernel
local SCRIPT = { latency = 0, replies = {
  { match = "# BOTTLENECK ANALYSIS", text = fenced({ bottlenecks = {
    { category = "memory", summary = "statistics in a Python loop", skill = "fusion", root_causes = { { cause = "loop", evidence = EV } } },
    { category = "latency", summary = "one channel at a time", skill = "ilp", root_causes = { { cause = "serial", evidence = EV } } } } }) },
  { match = "# PLAN", text = fenced({ plans = {
    { skill = "ilp", evidence = EV, plan = "all channels at once", change = "one mean over dim 1", params = { rows = 64 } } } }) },
  { match = "# REFLEXION", text = fenced({ was_fix_effective = true, lessons = { "vectorise over channels" } }) },
  { match = "# OPTIMIZE KERNEL", text = cpu.code_block("fast.py") },
} }

local function run(dir, port, argv)
  local a = { "--problem", problem, "--devices", "cpu", "--out", dir .. "/runs", "--refine", "0" }
  for _, x in ipairs(argv) do a[#a + 1] = x end
  local env = fake.env(port, { KAGENT_PYTHON = spec.python, KAGENT_DB = dir .. "/mem.db", OPENAI_BASE_URL = false,
    ANTHROPIC_BASE_URL = false })
  local r = fake.run_agent("beam.lua", a, env, 600)
  if r.code ~= 0 then
    error("beam.lua " .. table.concat(argv, " ") .. " exited " .. r.code .. "\n" .. r.stderr:sub(-3000))
  end
  return r
end

local function read_json(path) return json.decode(assert(fs.read(path), "missing " .. path)) end

local CASES = {
  { "beam", fx .. "slow.py" }, { "greedy", fx .. "slow.py" }, { "skill", fx .. "slow.py" },
  { "tune", fx .. "tunable.py", { "--tune-candidates", "1" } },
  { root .. "/examples/policies/rule_sweep.lua", fx .. "slow.py" },
}

describe("--resume", function()
  for _, c in ipairs(CASES) do
    local name = c[1]:match("([^/]+)%.lua$") or c[1]
    it("continues a " .. name .. " run in a second process", function()
      if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
      local dir = spec.tmpdir("resume-" .. name)
      local server, port = fake.start(SCRIPT, dir)
      local argv = { "--policy", c[1], "--kernel", c[2], "--rounds", "1", "--directions", "1", "--beam", "1" }
      for _, x in ipairs(c[3] or {}) do argv[#argv + 1] = x end
      run(dir, port, argv)
      local rd = fake.newest_run(dir .. "/runs")
      local s1 = read_json(rd .. "/summary.json")
      local st1 = read_json(rd .. "/state.json")
      expect.eq(s1.rounds, 1)
      expect.truthy(s1.attempts >= 1, "round 1 ran its workers")
      run(dir, port, { "--resume", rd, "--rounds", "2" })
      server:kill()
      local s2 = read_json(rd .. "/summary.json")
      expect.eq(s2.policy, s1.policy, "resumed with the run's own policy")
      expect.eq(s2.memory_run_id, s1.memory_run_id, "the same memory run")
      expect.truthy(s2.tokens.total >= s1.tokens.total, "usage carried over: " .. s1.tokens.total .. " -> " .. s2.tokens.total)
      if st1.stop_reason == json.null or st1.stop_reason == nil then
        expect.eq(s2.rounds, 2)
        expect.truthy(fs.exists(rd .. "/rounds/round_2/w1/kernel.py"), "round 2 in the same folder")
        expect.truthy(s2.attempts > s1.attempts, "attempts of both processes")
      else
        -- a run that stopped (the tuner converged) stays stopped, with its reason
        expect.eq(s2.stop_reason, st1.stop_reason)
        expect.eq(s2.rounds, 1)
      end
    end, { timeout = 600 })
  end
end)

-- kill -9 in the middle of round 2 (worker 1's attempt recorded, worker 2 waiting on a slow
-- reply), then --resume: the run's own options come back, round 2 is redone, the killed round's
-- attempts are marked superseded, and the database counts the attempts summary.json counts.
local fake_llm = dofile(root .. "/tests/fixtures/fake_llm/fake.lua")

local function two_directions(slow_second)
  local replies = {
    { match = "# REFLEXION", text = fenced({ was_fix_effective = true, lessons = { "one mean over dim 1" } }) },
    { match = "# BOTTLENECK ANALYSIS", text = fenced({ bottlenecks = {
      { category = "memory", summary = "DIRECTION_1 statistics in a loop", skill = "fusion", root_causes = { { cause = "loop", evidence = EV } } },
      { category = "latency", summary = "DIRECTION_2 one channel at a time", skill = "ilp", root_causes = { { cause = "serial", evidence = EV } } } } }) },
    { match = "DIRECTION_1", text = cpu.code_block("fast.py") },
  }
  if slow_second then replies[#replies + 1] = { match = "DIRECTION_2", text = cpu.code_block("slow.py"), times = 1 } end
  replies[#replies + 1] = { match = "DIRECTION_2", text = cpu.code_block("slow.py"), delay = slow_second and 120 or 0 }
  return { latency = 0, replies = replies }
end

describe("--resume after kill -9", function()
  it("redoes the killed round with the run's own options; database and summary.json agree", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("resume-kill")
    local srv = fake_llm.start({ script = two_directions(true) })
    local env = fake.env(srv.port, { KAGENT_PYTHON = spec.python, KAGENT_DB = dir .. "/mem.db", OPENAI_BASE_URL = false,
      ANTHROPIC_BASE_URL = false })
    local p = fake.spawn_agent("beam.lua", { "--problem", problem, "--kernel", fx .. "slow.py", "--devices", "cpu",
      "--out", dir .. "/runs", "--refine", "0", "--rounds", "2", "--beam", "1", "--directions", "2", "--plateau", "5",
      "--dtype", "fp32" }, env)
    -- wait for round 2's first recorded attempt
    local t0, seen = kagent.time.now(), 0
    while kagent.time.now() - t0 < 300 and p:running() do
      local db = kagent.mem.open(dir .. "/mem.db")
      if db then
        seen = db:query("SELECT count(*) AS n FROM attempts WHERE round = 2")[1].n
        db:close()
      end
      if seen > 0 then break end
      kagent.task.sleep(0.2)
    end
    if not p:running() then
      local r = p:wait(10)
      error("beam.lua ended before it was killed:\n" .. r.stderr:sub(-2000))
    end
    local rows = ""
    if seen ~= 1 then
      local db = assert(kagent.mem.open(dir .. "/mem.db"))
      rows = json.encode(db:query("SELECT round, worker, role, stage, error FROM attempts ORDER BY id"))
      db:close()
    end
    expect.eq(seen, 1, "worker 1 of round 2 recorded, worker 2 still waiting on the LLM " .. rows)
    p:kill("KILL")
    p:wait(30)
    local rd = fake.newest_run(dir .. "/runs")
    expect.eq(json.decode(fs.read(rd .. "/state.json")).round, 1, "the last whole round")
    expect.falsy(fs.exists(rd .. "/summary.json"))

    srv:set_script(two_directions(false))
    local r = fake.run_agent("beam.lua", { "--resume", rd }, env, 600)
    srv:stop()
    if r.code ~= 0 then error("--resume exited " .. r.code .. "\n" .. r.stderr:sub(-3000)) end
    local s = read_json(rd .. "/summary.json")
    expect.eq(s.rounds, 2)
    expect.eq(s.rounds_requested, 2, "the run's own --rounds, not the default 8")
    expect.eq(s.status, "done")
    local db = assert(kagent.mem.open(dir .. "/mem.db"))
    local row = db:query("SELECT id, status, config FROM runs")[1]
    expect.eq(row.status, "done")
    local function n(sql) return db:query(sql, { row.id })[1].n end
    expect.eq(n("SELECT count(*) AS n FROM attempts WHERE run_id = ? AND role NOT IN ('input', 'repair') AND stage != 'superseded'"),
      s.attempts, "the database and summary.json count the same attempts")
    expect.eq(s.attempts, 4, "two rounds of two workers")
    expect.eq(n("SELECT count(*) AS n FROM attempts WHERE run_id = ? AND stage = 'superseded'"), 1, "the killed round's attempt")
    expect.eq(n("SELECT count(*) AS n FROM skill_outcomes WHERE run_id = ?"), 4, "one skill outcome per kept attempt")
    expect.truthy(fs.exists(rd .. "/rounds/round_2/w2/kernel.py"), "round 2 redone in its folder")
    -- worker 2 of round 2 writes the source it wrote in round 1: the first process evaluated it,
    -- so the resumed one does not again, and traces so, as a run never killed does
    expect.truthy(fs.exists(rd .. "/rounds/round_2/w2/duplicate.json"), "the resumed round's duplicate traced")
    local moved = fs.list(rd .. "/superseded") or {}
    expect.eq(#moved, 1, "the killed round's trace kept aside")
    expect.truthy(fs.exists(rd .. "/superseded/" .. moved[1] .. "/round_2/w1/kernel.py"))
    db:close()
  end, { timeout = 900 })
end)

-- A run started with a relative --out, its folder then moved, resumed from a third working
-- folder: state.json names its kernels relative to the run folder, so nothing is lost; a state
-- written the old way (paths relative to the first working folder) still finds them; a kernel
-- that is gone stops the resume before any work (exit 2), never an empty kernel.
describe("--resume of a moved run folder", function()
  local function agent_in(cwd, argv, env)
    local cmd = { os.getenv("KAGENT_BIN") or "/proc/self/exe", "--env-file", "/dev/null", root .. "/agents/beam.lua" }
    for _, a in ipairs(argv) do cmd[#cmd + 1] = a end
    return assert(proc.run(cmd, { cwd = cwd, env = env, timeout = 600 }))
  end

  it("resumes from another folder with every kernel, and refuses a state whose kernel is gone", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("resume-moved")
    for _, d in ipairs({ "/first", "/moved", "/elsewhere" }) do fs.mkdir_p(dir .. d) end
    local server, port = fake.start(SCRIPT, dir)
    local env = fake.env(port, { KAGENT_PYTHON = spec.python, KAGENT_DB = dir .. "/mem.db", OPENAI_BASE_URL = false,
      ANTHROPIC_BASE_URL = false })
    local r = agent_in(dir .. "/first", { "--problem", problem, "--kernel", fx .. "slow.py", "--devices", "cpu",
      "--out", "runs", "--refine", "0", "--rounds", "1", "--directions", "1", "--beam", "1" }, env)
    if r.code ~= 0 then error("beam.lua exited " .. r.code .. "\n" .. r.stderr:sub(-3000)) end
    local id = fs.basename(fake.newest_run(dir .. "/first/runs"))
    local st = read_json(dir .. "/first/runs/" .. id .. "/state.json")
    expect.eq(st.input.path, "input_kernel.py", "kernel paths are relative to the run folder")
    assert(os.rename(dir .. "/first/runs/" .. id, dir .. "/moved/" .. id))
    local rd = dir .. "/moved/" .. id
    r = agent_in(dir .. "/elsewhere", { "--resume", rd, "--rounds", "2" }, env)
    if r.code ~= 0 then error("--resume exited " .. r.code .. "\n" .. r.stderr:sub(-3000)) end
    local s = read_json(rd .. "/summary.json")
    expect.eq(s.rounds, 2)
    local best = fs.read(rd .. "/best_kernel.py") or ""
    expect.truthy(#best > 0 and best:find("class ModelNew", 1, true), "best_kernel.py holds a kernel")

    -- a state written the old way: paths relative to the first working folder
    local old = read_json(rd .. "/state.json")
    local function legacy(k) k.path = "runs/" .. id .. "/" .. k.path end
    legacy(old.input); legacy(old.best)
    for _, k in ipairs(old.beam) do legacy(k) end
    old.round, old.stop_reason = 1, nil
    fs.write(rd .. "/state.json", json.encode(old))
    r = agent_in(dir .. "/elsewhere", { "--resume", rd, "--rounds", "3" }, env)
    if r.code ~= 0 then error("--resume of an old state exited " .. r.code .. "\n" .. r.stderr:sub(-3000)) end
    expect.truthy(#(fs.read(rd .. "/best_kernel.py") or "") > 0, "the old state's kernels were found")

    -- the input kernel's file is gone: one clear line, exit 2, nothing is run, and the finished
    -- run's record is left as it was (issue #53, item 7): summary.json, state.json, its run row
    local function run_row()
      local db = assert(kagent.mem.open(dir .. "/mem.db"))
      local row = db:query("SELECT * FROM runs WHERE id = ?", { read_json(rd .. "/state.json").mem_run_id })[1]
      db:close()
      return json.encode(row)
    end
    local summary_before, state_before, row_before = fs.read(rd .. "/summary.json"), fs.read(rd .. "/state.json"), run_row()
    expect.match(row_before, '"status":"done"')
    os.remove(rd .. "/input_kernel.py")
    r = agent_in(dir .. "/elsewhere", { "--resume", rd, "--rounds", "4" }, env)
    server:kill()
    expect.eq(r.code, 2, "exit status\n" .. r.stderr:sub(-2000))
    expect.falsy(fs.exists(rd .. "/rounds/round_4"), "no round ran on a state that lost a kernel")
    expect.eq(fs.read(rd .. "/summary.json"), summary_before, "summary.json is unchanged")
    expect.eq(fs.read(rd .. "/state.json"), state_before, "state.json is unchanged")
    expect.eq(run_row(), row_before, "the run row is unchanged")
    expect.match(r.stderr, "cannot resume .*kernel input of the saved state cannot be read at .*Nothing was changed")
  end, { timeout = 900 })
end)
