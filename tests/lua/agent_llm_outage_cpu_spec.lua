-- An LLM that is down, on the CPU against the FAKE LLM server (tests/fixtures/fake_llm): for each
-- way a server fails (500s, connections closed, a request never answered, a reply cut short),
-- agents/beam.lua stops with exit status 3 and a message saying how to continue, and memory
-- learns nothing from it: no lesson, skill outcome, reflexion or kernel failure, only attempts
-- marked llm_error. The server then comes back and --resume completes the run, with the
-- database and summary.json counting the same attempts. Needs a python with torch (KAGENT_PYTHON).
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs, json, mem = kagent.fs, kagent.json, kagent.mem
local session = require("fake_session")
local fake_llm = dofile(kagent.root .. "/tests/fixtures/fake_llm/fake.lua")
local cpu = session.cpu()

local EV = { { metric = "time_ms", value = 1, interpretation = "slow" } }
local WORKING = { latency = 0, replies = {
  { match = "# REFLEXION", text = session.fenced({ was_fix_effective = true, lessons = { "vectorise over channels" } }) },
  { match = "# BOTTLENECK ANALYSIS", text = session.fenced({ bottlenecks = {
    { category = "memory", summary = "statistics in a Python loop", skill = "fusion", root_causes = { { cause = "loop", evidence = EV } } } } }) },
  { match = "# OPTIMIZE KERNEL", text = cpu.code_block("fast.py") },
} }

local function down(rule) return { latency = 0, replies = { rule } } end

local CASES = {
  { "500", down({ status = 500, error_message = "upstream overloaded" }) },
  { "close", down({ fault = "close" }) },
  { "hang", down({ fault = "hang" }) },
  -- replies stream by default: a reply cut short is a stream that ends before its end event
  { "truncate", down({ fault = "stream_cut", text = ("a reply cut short "):rep(20) }) },
}

local function env(dir, port)
  return session.env(port, { KAGENT_PYTHON = spec.python, KAGENT_DB = dir .. "/mem.db", OPENAI_BASE_URL = false,
    ANTHROPIC_BASE_URL = false, KAGENT_LLM_TIMEOUT = false, KAGENT_LLM_STREAM = false })
end

local function count(db, sql, params) return db:query(sql, params)[1].n end

describe("an LLM outage", function()
  for i, c in ipairs(CASES) do
    it("(" .. c[1] .. ") stops the run with exit 3 and poisons no memory" .. (i == 1 and "; --resume completes it" or ""), function()
      if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
      local dir = spec.tmpdir("outage-" .. c[1])
      local srv = fake_llm.start({ script = c[2] })
      local argv = { "--problem", cpu.problem, "--kernel", cpu.fx .. "slow.py", "--devices", "cpu", "--out", dir .. "/runs",
        "--rounds", "2", "--beam", "1", "--directions", "1", "--refine", "0", "--llm-timeout", "total=2s,idle=0.5s",
        "--llm-backoff", "0.05", "--llm-failures", "3" }
      local r = session.run_agent("beam.lua", argv, env(dir, srv.port), 600)
      expect.eq(r.code, 3, "exit status of an LLM outage\n" .. r.stderr:sub(-2000))
      expect.truthy(r.stderr:find("stopped: 3 LLM calls failed in a row", 1, true), "a clear message:\n" .. r.stderr:sub(-1500))
      expect.truthy(r.stderr:find("--resume ", 1, true), "it says how to continue")
      local rd = session.newest_run(dir .. "/runs")
      expect.falsy(fs.exists(rd .. "/summary.json"), "the run is not finished")

      local db = assert(mem.open(dir .. "/mem.db"))
      local run = db:query("SELECT id, status FROM runs")[1]
      expect.eq(run.status, "stopped")
      expect.eq(count(db, "SELECT count(*) AS n FROM lessons"), 0, "lessons")
      expect.eq(count(db, "SELECT count(*) AS n FROM skill_outcomes"), 0, "skill outcomes")
      expect.eq(count(db, "SELECT count(*) AS n FROM reflexions"), 0, "reflexions (avoid patterns)")
      expect.eq(count(db, "SELECT count(*) AS n FROM attempts WHERE role != 'input' AND stage != 'llm_error'"), 0,
        "kernel failures or outcomes recorded for LLM failures")
      expect.truthy(count(db, "SELECT count(*) AS n FROM attempts WHERE stage = 'llm_error'") >= 1, "the LLM failures are recorded as such")
      local st = json.decode(fs.read(rd .. "/state.json"))
      expect.eq(st.round, 0, "the interrupted round is not kept")
      expect.truthy(st.llm_failures.calls >= 3, "failures counted in state.json: " .. json.encode(st.llm_failures))
      db:close()
      if i > 1 then srv:stop(); return end

      -- the server answers again: the run continues in the same folder and memory run
      srv:set_script(WORKING)
      local r2 = session.run_agent("beam.lua", { "--resume", rd }, env(dir, srv.port), 600)
      srv:stop()
      expect.eq(r2.code, 0, "resumed run\n" .. r2.stderr:sub(-2000))
      local s = json.decode(fs.read(rd .. "/summary.json"))
      expect.eq(s.status, "done")
      expect.eq(s.rounds, 2, "both rounds, the interrupted one redone")
      expect.eq(s.rounds_requested, 2, "the run's own --rounds")
      expect.truthy(s.llm_failures.calls >= 3, "summary.json counts the LLM failures of the whole run")
      db = assert(mem.open(dir .. "/mem.db"))
      expect.eq(db:query("SELECT status FROM runs WHERE id = ?", { run.id })[1].status, "done")
      local live = count(db, "SELECT count(*) AS n FROM attempts WHERE run_id = ? AND role NOT IN ('input', 'repair')"
        .. " AND stage != 'superseded'", { run.id })
      expect.eq(live, s.attempts, "the database and summary.json count the same attempts")
      expect.truthy(count(db, "SELECT count(*) AS n FROM attempts WHERE stage = 'superseded'") >= 1,
        "the interrupted round's attempts are marked superseded")
      expect.eq(count(db, "SELECT count(*) AS n FROM attempts WHERE stage = 'llm_error'"), 0,
        "no llm_error attempt left counting")
      expect.truthy(count(db, "SELECT count(*) AS n FROM lessons") >= 1, "the working LLM's lessons are recorded")
      db:close()
    end, { timeout = 600 })
  end

  it("while generating the first kernel stops with exit 3, and nothing is learned", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("outage-generate")
    local srv = fake_llm.start({ script = CASES[1][2] })
    local r = session.run_agent("beam.lua", { "--problem", cpu.problem, "--devices", "cpu", "--out", dir .. "/runs",
      "--gen-workers", "2", "--llm-timeout", "total=2s", "--llm-backoff", "0.05", "--llm-failures", "3" },
      env(dir, srv.port), 600)
    srv:stop()
    expect.eq(r.code, 3, r.stderr:sub(-2000))
    expect.truthy(r.stderr:find("--resume ", 1, true), r.stderr:sub(-800))
    local rd = session.newest_run(dir .. "/runs")
    local st = json.decode(fs.read(rd .. "/state.json"))
    expect.eq(st.input, nil, "no input kernel yet: --resume starts the run again")
    local db = assert(mem.open(dir .. "/mem.db"))
    expect.eq(db:query("SELECT status FROM runs")[1].status, "stopped")
    expect.eq(count(db, "SELECT count(*) AS n FROM lessons") + count(db, "SELECT count(*) AS n FROM archive"), 0)
    db:close()
  end, { timeout = 600 })

  it("a local server that does not answer when asked for its model: exit 3 before anything starts", function()
    local dir = spec.tmpdir("outage-models")
    local srv = fake_llm.start({ script = { models_reply = { fault = "hang" } }, flavor = "vllm" })
    local e = env(dir, srv.port)
    e.KAGENT_MODEL, e.OPENAI_API_KEY = false, false
    local r = session.run_agent("beam.lua", { "--problem", cpu.problem, "--kernel", cpu.fx .. "slow.py", "--devices", "cpu",
      "--out", dir .. "/runs", "--llm-timeout", "total=1s,idle=0.3s" }, e, 120)
    srv:stop()
    expect.eq(r.code, 3, r.stderr)
    expect.truthy(r.stderr:find("the LLM does not answer", 1, true), r.stderr)
    expect.truthy(r.stderr:find("Nothing was started", 1, true), r.stderr)
    expect.falsy(fs.exists(dir .. "/runs"), "no run folder")
  end)
end)
