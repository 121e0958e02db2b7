-- An LLM that answers 200 with no usable code (issue #28, item 7), on the CPU against the FAKE
-- LLM server (tests/fixtures/fake_llm): a refusal, an empty reply and megabytes of junk are failed
-- replies, not failed kernels. The run goes on and ends normally, and memory learns nothing from
-- them: no lesson, skill outcome or reflexion (avoid patterns), only attempts marked llm_error
-- with ENOCODE; a large reply is kept once in the run folder, cut to its head with a note of what
-- was dropped. Needs a python with torch (KAGENT_PYTHON).
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. kagent.root .. "/?.lua;" .. package.path
local fs, json, mem, proc = kagent.fs, kagent.json, kagent.mem, kagent.proc
local session = require("fake_session")
local run_lib = require("agents.run")
local fake_llm = dofile(kagent.root .. "/tests/fixtures/fake_llm/fake.lua")
local cpu = session.cpu()

local EV = { { metric = "time_ms", value = 1, interpretation = "slow" } }
local JUNK = ("@#%&*! "):rep(math.floor(3 * 1048576 / 7) + 1)  -- 3 MB, no code fence anywhere

local function script(optimize_reply)
  return { latency = 0, replies = {
    { match = "# REFLEXION", text = session.fenced({ was_fix_effective = false, lessons = { "LESSON FROM A NON-ANSWER" },
      avoid_patterns = { "AVOID FROM A NON-ANSWER" } }) },
    { match = "# BOTTLENECK ANALYSIS", text = session.fenced({ bottlenecks = {
      { category = "memory", summary = "statistics in a Python loop", skill = "fusion", root_causes = { { cause = "loop", evidence = EV } } } } }) },
    { match = "# OPTIMIZE KERNEL", text = optimize_reply },
  } }
end

local CASES = {
  { "a refusal", "I'm sorry, but I can't help with rewriting this kernel.", {} },
  { "an empty reply", "", {} },
  -- taken whole: the fake streams 4 characters per event, which would make 3 MB slow to send;
  -- under a raised --max-reply-bytes (over the default a reply is ETOOBIG: agent_reply_size_cpu_spec)
  { "3 MB of junk", JUNK, { KAGENT_LLM_STREAM = "0" }, { "--max-reply-bytes", tostring(4 * 1048576) } },
}

local function count(db, sql, params) return db:query(sql, params)[1].n end

-- bytes of every file under dir
local function folder_bytes(dir)
  local r = assert(proc.run({ "du", "-sb", dir }, { timeout = 30 }))
  return tonumber(r.stdout:match("^(%d+)"))
end

describe("an LLM reply with no code", function()
  it("keeps the head of a large reply in the run folder and says what was cut", function()
    local t = run_lib.reply_trace(("x"):rep(run_lib.MAX_REPLY_TRACE + 10))
    expect.eq(t:sub(1, run_lib.MAX_REPLY_TRACE), ("x"):rep(run_lib.MAX_REPLY_TRACE))
    expect.match(t, "the reply was %d+ bytes; the 10 after the first %d+ are not kept here")
    expect.eq(run_lib.reply_trace("short"), "short")
  end)

  it("is ENOCODE for a refusal, nothing, or a blank code block, and code otherwise", function()
    local extract = function(text) return kagent.llm.extract_code(text, "python") end
    for _, text in ipairs({ "I cannot do that.", "", "```python\n   \n```" }) do
      local code, err, ecode = run_lib.code_from(extract, text)
      expect.eq(code, nil, text)
      expect.eq(ecode, "ENOCODE")
      expect.match(err, "^ENOCODE: the LLM's reply %(%d+ bytes%) has no code block")
    end
    expect.eq(run_lib.code_from(extract, "```python\nx = 1\n```"), "x = 1")
  end)

  for _, c in ipairs(CASES) do
    it("(" .. c[1] .. ") is a failed reply: the run ends normally and memory learns nothing", function()
      if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
      local dir = spec.tmpdir("nonanswer")
      local srv = fake_llm.start({ script = script(c[2]) })
      local e = session.env(srv.port, { KAGENT_PYTHON = spec.python, KAGENT_DB = dir .. "/mem.db", OPENAI_BASE_URL = false,
        ANTHROPIC_BASE_URL = false, KAGENT_LLM_TIMEOUT = false, KAGENT_LLM_STREAM = false })
      for k, v in pairs(c[3]) do e[k] = v end
      local r = session.run_agent("beam.lua", { "--problem", cpu.problem, "--kernel", cpu.fx .. "slow.py", "--devices", "cpu",
        "--out", dir .. "/runs", "--rounds", "1", "--beam", "1", "--directions", "1", "--refine", "0",
        "--llm-backoff", "0.05", unpack(c[4] or {}) }, e, 600)
      srv:stop()
      expect.eq(r.code, 0, "a run whose LLM answered without code ends normally\n" .. r.stderr:sub(-2000))
      local db = assert(mem.open(dir .. "/mem.db"))
      expect.eq(count(db, "SELECT count(*) AS n FROM lessons"), 0, "lessons")
      expect.eq(count(db, "SELECT count(*) AS n FROM skill_outcomes"), 0, "skill outcomes")
      expect.eq(count(db, "SELECT count(*) AS n FROM reflexions"), 0, "reflexions (avoid patterns)")
      expect.eq(count(db, "SELECT count(*) AS n FROM attempts WHERE role != 'input' AND stage != 'llm_error'"), 0,
        "kernel failures recorded for a reply with no code")
      expect.truthy(count(db, "SELECT count(*) AS n FROM attempts WHERE stage = 'llm_error' AND error_signature = 'ENOCODE'") >= 1,
        "the non-answer is recorded as a failed reply")
      db:close()
      local rd = session.newest_run(dir .. "/runs")
      local s = json.decode(assert(fs.read(rd .. "/summary.json")))
      expect.eq(s.status, "done")
      expect.truthy((s.outcomes or {}).llm_error and s.outcomes.llm_error >= 1, "counted as llm_error: " .. json.encode(s.outcomes))
      if #c[2] > run_lib.MAX_REPLY_TRACE then
        expect.truthy(folder_bytes(rd) < #c[2], "the run folder keeps less than one copy of the reply: " .. folder_bytes(rd))
        local found = assert(proc.run({ "grep", "-rl", "--", "the reply was " .. #c[2] .. " bytes", rd }, { timeout = 30 }))
        expect.truthy(found.stdout ~= "", "the cut is noted where the reply is kept")
      end
    end, { timeout = 600 })
  end
end)
