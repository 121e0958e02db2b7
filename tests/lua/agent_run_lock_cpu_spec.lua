-- One process per run (issue #53, item 4), on the CPU against the FAKE LLM server
-- (tests/fixtures/fake_llm): while a run waits on a slow reply, a --resume of its folder is
-- refused (exit 2) naming the holder's pid, and changes nothing in the folder or the database;
-- once the holder is killed with SIGKILL the run folder's lock is free again.
-- Needs a python with torch (KAGENT_PYTHON).
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs, json, proc = kagent.fs, kagent.json, kagent.proc
local session = require("fake_session")
local fake_llm = dofile(kagent.root .. "/tests/fixtures/fake_llm/fake.lua")
local cpu = session.cpu()

local EV = { { metric = "time_ms", value = 1, interpretation = "slow" } }

-- what a process could change: every file of the run folder (path, size, modification time),
-- and the database's rows of the run
local function folder_state(rd)
  local r = assert(proc.run({ "find", rd, "-printf", "%P %s %T@\n" }, { timeout = 30 }))
  local lines = {}
  for l in r.stdout:gmatch("[^\n]+") do lines[#lines + 1] = l end
  table.sort(lines)
  return table.concat(lines, "\n")
end

local function db_state(path)
  local db = assert(kagent.mem.open(path))
  local out = json.encode({ runs = db:query("SELECT * FROM runs ORDER BY id"),
    attempts = db:query("SELECT id, stage FROM attempts ORDER BY id"),
    calls = db:query("SELECT count(*) AS n FROM llm_calls")[1].n })
  db:close()
  return out
end

describe("a run folder in use", function()
  it("refuses a second --resume with the holder's pid, changing nothing", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("run-lock")
    -- the optimize reply never comes while the test runs: the first process stays in round 1
    local srv = fake_llm.start({ script = { latency = 0, replies = {
      { match = "# BOTTLENECK ANALYSIS", text = session.fenced({ bottlenecks = {
        { category = "memory", summary = "statistics in a Python loop", skill = "fusion", root_causes = { { cause = "loop", evidence = EV } } } } }) },
      { match = "# OPTIMIZE KERNEL", delay = 600, text = cpu.code_block("fast.py") },
    } } })
    local env = session.env(srv.port, { KAGENT_PYTHON = spec.python, KAGENT_DB = dir .. "/mem.db", OPENAI_BASE_URL = false,
      ANTHROPIC_BASE_URL = false, KAGENT_LLM_TIMEOUT = "total=20m,start=15m,idle=15m", KAGENT_LLM_STREAM = false })
    local p = session.spawn_agent("beam.lua", { "--problem", cpu.problem, "--kernel", cpu.fx .. "slow.py", "--devices", "cpu",
      "--out", dir .. "/runs", "--rounds", "1", "--beam", "1", "--directions", "1", "--refine", "0" }, env)
    -- wait until it asks for the optimized kernel: from then on it only waits
    local asked = false
    while p:running() and not asked do
      for _, t in ipairs(srv:stats(true).texts or {}) do
        if t:find("# OPTIMIZE KERNEL", 1, true) then asked = true end
      end
      if not asked then kagent.task.sleep(0.2) end
    end
    if not asked then
      local r = p:wait(10)
      srv:stop()
      error("beam.lua ended before it asked the optimizer:\n" .. r.stderr:sub(-2000))
    end
    local rd = session.newest_run(dir .. "/runs")
    expect.eq(fs.read(rd .. "/run.lock"), p.pid .. "\n", "the run's lock file holds its pid")
    local folder_before, db_before = folder_state(rd), db_state(dir .. "/mem.db")

    local r = session.run_agent("beam.lua", { "--resume", rd }, env, 300)
    local folder_after, db_after = folder_state(rd), db_state(dir .. "/mem.db")
    local still = p:running()
    p:kill("KILL")
    p:wait(30)
    srv:stop()
    expect.eq(still, true, "the first process was still working")
    expect.eq(r.code, 2, "a second process on a run in use is refused\n" .. r.stderr:sub(-2000))
    expect.match(r.stderr, "the run is in use by process " .. p.pid)
    expect.eq(folder_after, folder_before, "the refused --resume changed nothing in the run folder")
    expect.eq(db_after, db_before, "the refused --resume changed nothing in the database")

    -- the lock died with the process it belonged to
    local h, err = fs.lock(rd .. "/run.lock")
    expect.truthy(h, "the lock is free once its holder was killed: " .. tostring(err))
    if h then h:unlock() end
  end, { timeout = 900 })
end)
