-- Replies have a size (issue #53, item 3), on the CPU against the FAKE LLM server
-- (tests/fixtures/fake_llm): an optimize reply carrying a 50 MB code block is a failed reply
-- (ETOOBIG), counted as such; it is not read past --max-reply-bytes, kept in the run folder or the
-- database, or sent back to the model; the run ends as after any failed reply. Whole replies
-- (KAGENT_LLM_STREAM=0): the fake streams 4 characters per event, too slow for 50 MB.
-- Needs a python with torch (KAGENT_PYTHON).
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. kagent.root .. "/?.lua;" .. package.path
local fs, json, mem, proc = kagent.fs, kagent.json, kagent.mem, kagent.proc
local session = require("fake_session")
local fake_llm = dofile(kagent.root .. "/tests/fixtures/fake_llm/fake.lua")
local cpu = session.cpu()

local EV = { { metric = "time_ms", value = 1, interpretation = "slow" } }
local MB = 1048576

-- bytes of the files and folders named (du -sbc: their total)
local function bytes(...)
  local r = assert(proc.run({ "du", "-sbc", ... }, { timeout = 30 }))
  return tonumber(r.stdout:match("(%d+)%s+total"))
end

describe("an LLM reply over the size limit", function()
  it("(a 50 MB code block) is a failed reply, kept nowhere and never resent", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("reply-size")
    -- a kernel that would verify, padded to 50 MB by a comment: only its size is wrong
    local huge = "Changed the kernel.\n```python\n" .. assert(fs.read(cpu.fx .. "fast.py")) .. "\n# "
      .. ("x"):rep(50 * MB) .. "\n```\n"
    local srv = fake_llm.start({ script = { latency = 0, replies = {
      { match = "# REFLEXION", text = session.fenced({ was_fix_effective = false, lessons = { "LESSON" } }) },
      { match = "# BOTTLENECK ANALYSIS", text = session.fenced({ bottlenecks = {
        { category = "memory", summary = "statistics in a Python loop", skill = "fusion", root_causes = { { cause = "loop", evidence = EV } } } } }) },
      { match = "# OPTIMIZE KERNEL", text = huge },
    } } })
    huge = nil  -- luacheck: ignore 311 (let the collector take the 50 MB)
    collectgarbage()
    local e = session.env(srv.port, { KAGENT_PYTHON = spec.python, KAGENT_DB = dir .. "/mem.db", OPENAI_BASE_URL = false,
      ANTHROPIC_BASE_URL = false, KAGENT_LLM_TIMEOUT = false, KAGENT_LLM_STREAM = "0" })
    local r = session.run_agent("beam.lua", { "--problem", cpu.problem, "--kernel", cpu.fx .. "slow.py", "--devices", "cpu",
      "--out", dir .. "/runs", "--rounds", "1", "--beam", "1", "--directions", "1", "--refine", "0",
      "--llm-backoff", "0.05" }, e, 600)
    local stats = srv:stats()
    srv:stop()
    expect.eq(r.code, 0, "a run whose reply was too large ends as after any failed reply\n" .. r.stderr:sub(-2000))
    local limit = MB  -- --max-reply-bytes's default (docs/agents.md)
    expect.truthy(#stats.request_bytes >= 2, "the optimize question and its re-ask were asked")
    for i, n in ipairs(stats.request_bytes) do
      expect.truthy(n < limit, string.format("request %d to the LLM is %d bytes: the reply was sent back", i, n))
    end
    local rd = session.newest_run(dir .. "/runs")
    expect.truthy(bytes(rd) < 4 * MB, "the run folder stays small: " .. bytes(rd) .. " bytes")
    local db_files = { dir .. "/mem.db" }
    for _, f in ipairs({ "-wal", "-shm" }) do
      if fs.exists(dir .. "/mem.db" .. f) then db_files[#db_files + 1] = dir .. "/mem.db" .. f end
    end
    expect.truthy(bytes(unpack(db_files)) < 4 * MB, "the database stays small")
    local s = json.decode(assert(fs.read(rd .. "/summary.json")))
    expect.eq(s.status, "done")
    expect.truthy((s.outcomes or {}).llm_error and s.outcomes.llm_error >= 1, "counted as llm_error: " .. json.encode(s.outcomes))
    local t = s.replies and s.replies.totals or {}
    expect.truthy((t.lost or 0) >= 1, "counted as a lost reply: " .. json.encode(s.replies))
    local db = assert(mem.open(dir .. "/mem.db"))
    expect.truthy(db:query("SELECT count(*) AS n FROM attempts WHERE stage = 'llm_error' AND error_signature = 'ETOOBIG'")[1].n >= 1,
      "the failed reply is recorded with its code")
    expect.eq(db:query("SELECT count(*) AS n FROM lessons")[1].n, 0, "nothing learned from it")
    db:close()
    local found = assert(proc.run({ "grep", "-rl", "--", "over max_reply", rd }, { timeout = 30 }))
    expect.truthy(found.stdout ~= "", "the reply file notes the refused reply and its size")
  end, { timeout = 600 })
end)
