-- Nothing lost, on the CPU against the FAKE LLM server (tests/fixtures/fake_llm): a run whose
-- writes fail is no success, and a database locked by another process mid-run loses no row.
-- * The run folder, then the memory database, on a small tmpfs that the test fills once the
--   input kernel is measured (state.json at round 0): agents/beam.lua ends with exit status 6,
--   naming the path and the system's error, and never says "confirmed best".
-- * Another process (python3's sqlite3) holds an exclusive transaction on the database for 30 s
--   from the same point: the run completes, the database holds every attempt summary.json counts,
--   some of them made while the lock was held, and no task held the event loop for long (the
--   scheduler's warning of a task that ran without yielding, KAGENT_HOG_WARN, never fired).
-- Mounting needs root (or the mount capability): where the machine refuses, the tmpfs cases
-- report themselves skipped, saying so. Needs a python with torch (KAGENT_PYTHON).
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs, json, mem, proc, task = kagent.fs, kagent.json, kagent.mem, kagent.proc, kagent.task
local session = require("fake_session")
local fake_llm = dofile(kagent.root .. "/tests/fixtures/fake_llm/fake.lua")
local cpu = session.cpu()

local EV = { { metric = "time_ms", value = 1, interpretation = "slow" } }
-- the first analysis waits 3 s, so the test fills the disk (or takes the lock) before round 1 writes
local SCRIPT = { latency = 0, replies = {
  { match = "# REFLEXION", text = session.fenced({ was_fix_effective = true, lessons = { "vectorise over channels" } }) },
  { match = "# BOTTLENECK ANALYSIS", delay = 3, text = session.fenced({ bottlenecks = {
    { category = "memory", summary = "statistics in a Python loop", skill = "fusion", root_causes = { { cause = "loop", evidence = EV } } } } }) },
  { match = "# OPTIMIZE KERNEL", text = cpu.code_block("fast.py") },
} }

local function argv(out)
  return { "--problem", cpu.problem, "--kernel", cpu.fx .. "slow.py", "--devices", "cpu", "--out", out,
    "--rounds", "2", "--beam", "1", "--directions", "1", "--refine", "0" }
end

local function env(db, port, extra)
  local e = session.env(port, { KAGENT_PYTHON = spec.python, KAGENT_DB = db, OPENAI_BASE_URL = false,
    ANTHROPIC_BASE_URL = false, KAGENT_LLM_TIMEOUT = false, KAGENT_LLM_STREAM = false })
  for k, v in pairs(extra or {}) do e[k] = v end
  return e
end

-- with_tmpfs(dir, size, fn): fn() with a tmpfs of `size` mounted on dir, unmounted after (also
-- when fn fails); the case is skipped where the machine does not let the test mount one
local function with_tmpfs(dir, size, fn)
  fs.mkdir_p(dir)
  local r = proc.run({ "mount", "-t", "tmpfs", "-o", "size=" .. size, "kagent-test", dir }, { timeout = 30 })
  if not (r and r.code == 0) then
    skip("cannot mount a tmpfs on " .. dir .. " (needs root or CAP_SYS_ADMIN): "
      .. tostring(r and (r.stderr:match("[^\n]+") or r.code)))
  end
  local ok, err = pcall(fn)
  local u = proc.run({ "umount", dir }, { timeout = 30 })
  if not (u and u.code == 0) then proc.run({ "umount", "-l", dir }, { timeout = 30 }) end
  if not ok then error(err, 0) end
end

-- fill(dir): the filesystem of dir left without a free byte (dd stops at ENOSPC)
local function fill(dir)
  proc.run({ "dd", "if=/dev/zero", "of=" .. dir .. "/filler", "bs=64k" }, { timeout = 60 })
  expect.falsy(fs.write(dir .. "/probe", ("x"):rep(8192)), "the filesystem of " .. dir .. " is full")
end

-- until_measured(p, out) -> the run folder, once its input kernel is measured (state.json, round 0)
local function until_measured(p, out)
  for _ = 1, 3000 do
    local rd = session.newest_run(out)
    local ok, st = pcall(json.decode, rd and fs.read(rd .. "/state.json") or "null")
    if ok and type(st) == "table" and st.round == 0 then return rd end
    if not p:running() then break end
    task.sleep(0.1)
  end
  local res = p:wait(5)
  error("the run did not reach round 0: exit " .. tostring(res.code) .. "\n" .. tostring(res.stderr):sub(-2000), 0)
end

local function count(db, sql, params) return db:query(sql, params)[1].n end

-- a run stopped by a failed write: exit 6, one line naming `path` and `error`, no result claimed
local function expect_write_stop(res, path, error_text)
  expect.eq(res.code, 6, "exit status of a failed write\n" .. res.stderr:sub(-3000))
  local line = res.stderr:match("[^\n]*stopped: cannot write [^\n]*")
  expect.truthy(line, "a clear message:\n" .. res.stderr:sub(-2000))
  expect.truthy(line:find(path, 1, true), "it names " .. path .. ": " .. line)
  expect.truthy(line:find(error_text, 1, true), "it names the error (" .. error_text .. "): " .. line)
  expect.falsy((res.stdout .. res.stderr):find("confirmed best", 1, true), "no result is claimed")
end

describe("writes that fail, and a locked database", function()
  it("a full run folder ends the run with exit 6 naming the file, never 'confirmed best'", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("writes-rundir")
    local out = dir .. "/fs/runs"
    with_tmpfs(dir .. "/fs", "8m", function()
      local srv = fake_llm.start({ script = SCRIPT })
      local p = session.spawn_agent("beam.lua", argv(out), env(dir .. "/mem.db", srv.port))
      local rd = until_measured(p, out)
      fill(dir .. "/fs")
      local res = p:wait(600)
      srv:stop()
      expect_write_stop(res, rd, "No space left on device")
      expect.falsy(fs.exists(rd .. "/best_kernel.py"), "no best kernel")
      local db = assert(mem.open(dir .. "/mem.db"))
      expect.eq(db:query("SELECT status FROM runs ORDER BY id DESC LIMIT 1")[1].status, "failed",
        "the run row says failed (the database had room)")
      db:close()
    end)
  end, { timeout = 900 })

  it("a full database ends the run with exit 6 naming the database, never 'confirmed best'", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("writes-db")
    local db_path = dir .. "/fs/mem.db"
    with_tmpfs(dir .. "/fs", "8m", function()
      local srv = fake_llm.start({ script = SCRIPT })
      local p = session.spawn_agent("beam.lua", argv(dir .. "/runs"), env(db_path, srv.port))
      local rd = until_measured(p, dir .. "/runs")
      fill(dir .. "/fs")
      local res = p:wait(600)
      srv:stop()
      expect_write_stop(res, db_path, "No space left on device")
      local s = json.decode(assert(fs.read(rd .. "/summary.json"), "summary.json (the run folder had room)\n" .. res.stderr:sub(-3000)))
      expect.eq(s.status, "failed", "summary.json says failed")
      expect.truthy(tostring(s.error):find(db_path, 1, true), "and why: " .. tostring(s.error))
    end)
  end, { timeout = 900 })

  it("a database locked for 30 s mid-run loses no row and stalls no task", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("writes-locked")
    local db_path = dir .. "/mem.db"
    local srv = fake_llm.start({ script = SCRIPT })
    -- a task that runs 4 s without yielding is logged (kagent.task): SQLite's busy timeout slept 5 s
    local p = session.spawn_agent("beam.lua", argv(dir .. "/runs"), env(db_path, srv.port, { KAGENT_HOG_WARN = "4" }))
    local rd = until_measured(p, dir .. "/runs")
    local holder = assert(proc.spawn({ "python3", "-c", [[
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("BEGIN EXCLUSIVE")
print("locked %f" % time.time(), flush=True)
time.sleep(30)
c.execute("COMMIT")
print("released %f" % time.time(), flush=True)
]], db_path }))
    local locked_at = tonumber((assert(holder:read_line(30), "the holder took the lock")):match("^locked (%S+)"))
    local res = p:wait(900)
    srv:stop()
    local released_at = tonumber((holder:read_line(60) or ""):match("^released (%S+)"))
    holder:wait(10)
    -- the run completes: done, or (a loaded machine's answer on the timing, not the database's
    -- doing) none measured, 7; never 6, a write that failed, nor 5, an honest kernel refused
    local done = res.code == 0
    expect.truthy(done or res.code == 7, "the run completes, exit " .. tostring(res.code) .. "\n"
      .. res.stderr:sub(-3000))
    expect.truthy(released_at, "the holder held the lock its 30 s")
    expect.falsy(res.stderr:find("without yielding", 1, true), "no task held the loop:\n" .. res.stderr:sub(-3000))
    local s = json.decode(assert(fs.read(rd .. "/summary.json")))
    local db = assert(mem.open(db_path))
    local id = s.memory_run_id
    expect.eq(db:query("SELECT status FROM runs WHERE id = ?", { id })[1].status, done and "done" or "unconfirmed")
    expect.eq(count(db, "SELECT count(*) AS n FROM attempts WHERE run_id = ? AND role NOT IN ('input', 'repair')",
      { id }), s.attempts, "the database and summary.json count the same attempts")
    expect.eq(count(db, "SELECT count(*) AS n FROM attempts WHERE run_id = ? AND role = 'input'", { id }), 1, "the input's row")
    expect.eq(count(db, "SELECT count(*) AS n FROM archive WHERE run_id = ?", { id }), done and 1 or 0,
      "the confirmed best archived (the row the issue saw lost)")
    -- rows made while the lock was held (their time is taken before the write) waited and landed
    expect.truthy(count(db, "SELECT (SELECT count(*) FROM attempts WHERE run_id = :id AND created > :t0 AND created < :t1)"
      .. " + (SELECT count(*) FROM llm_calls WHERE run_id = :id AND created > :t0 AND created < :t1) AS n",
      { id = id, t0 = locked_at, t1 = released_at }) >= 1, "rows made during the hold are there")
    db:close()
  end, { timeout = 900 })
end)
