-- Replay that reproduces a run: a two-round CPU beam run recorded against the FAKE LLM server,
-- then replayed with the server gone (its URL a port nothing listens on). Every call is answered
-- at its place although the prompts carry fresh timings; a replay under another model finds
-- nothing, fails every branch at stage "replay", lists the misses and exits 4, sending nothing.
-- A replay reproduces the questions only where the evaluator gives the same verdicts, and the
-- replay rightly misses where it did not. The spec checks that misses come only after different
-- verdicts and records again once; different verdicts twice fail it (a noisy machine is the
-- evaluator's to tell from the kernel, kagent_eval/worker/noise.py, not a reason to skip).
-- Needs a python with torch (KAGENT_PYTHON).
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs, json, mem = kagent.fs, kagent.json, kagent.mem
local fake = require("fake_session")
local session = require("replay_session")
local calls = require("agents.run.calls")

local function attempts(run_dir)
  local st = json.decode(assert(fs.read(run_dir .. "/state.json")))
  local out = {}
  for _, a in ipairs(st.attempts) do
    out[#out + 1] = string.format("r%dw%d %s", a.round, a.worker, a.outcome == "failed" and ("failed:" .. tostring(a.stage)) or a.outcome)
  end
  table.sort(out)
  return out
end

local function places(run_dir)
  local out = {}
  for _, r in ipairs(calls.read_csv(run_dir .. "/usage.csv")) do
    out[#out + 1] = table.concat({ r.role, r.round, r.parent, r.worker, r.attempt }, "/")
  end
  table.sort(out)
  return out
end

describe("LLM replay of a recorded run", function()
  local dir, recorded
  local function setup(fresh)
    if not fake.cpu().have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    if fresh or not recorded then
      dir = spec.tmpdir("replay")
      recorded = session.record(dir)
    end
  end

  it("answers every call at its place, sends nothing and takes the same branches", function()
    local r, replayed
    for try = 1, 2 do
      setup(try > 1)
      r = fake.run_agent("beam.lua", session.argv(dir .. "/replay"), session.env(session.DEAD_PORT, dir, "replay"), 900)
      replayed = fake.newest_run(dir .. "/replay")
      if r.code == 0 then break end
      if r.code ~= 4 then error("the replay exited " .. r.code .. "\n" .. r.stderr:sub(-3000)) end
      -- misses: some attempt measured before them must have had another verdict, or the keys are wrong
      local diff = session.differing(session.verdicts(recorded), session.verdicts(replayed))
      if #diff == 0 then
        error("the replay missed although every attempt it measured had the recorded verdict:\n"
          .. fs.read(replayed .. "/replay_misses.json") .. "\n" .. r.stderr:sub(-2000))
      end
      print(string.format("     (try %d: the evaluator's verdicts differed between the run and its replay on this loaded "
        .. "machine, so the replay asked other questions: %s)", try, table.concat(diff, "; ")))
      if try == 2 then error("the evaluator gave different verdicts twice: " .. table.concat(diff, "; ")) end
    end
    local s0 = json.decode(fs.read(recorded .. "/summary.json"))
    local s1 = json.decode(fs.read(replayed .. "/summary.json"))
    print(string.format("     (recorded: %d calls, %d sent; replayed: %d hits, %d misses, %d sent)", s0.replay.calls,
      s0.replay.sent, s1.replay.hits, s1.replay.misses, s1.replay.sent))
    expect.eq(s0.replay.mode, "record")
    expect.eq(s0.replay.sent, s0.replay.calls, "the recording sent every call")
    expect.truthy(s0.replay.calls >= 10, "a real two-round run: " .. s0.replay.calls .. " calls")
    expect.same(s1.replay, { mode = "replay", calls = s0.replay.calls, hits = s0.replay.calls, misses = 0, sent = 0 })
    expect.same(places(replayed), places(recorded), "the same calls at the same places")
    expect.same(attempts(replayed), attempts(recorded), "the same attempts and outcomes")
    expect.match(r.stderr, "LLM replay: %d+ hit%(s%), 0 miss%(es%)")
    -- the per-call usage is in memory too, one row per call
    local db = assert(mem.open(dir .. "/mem_replay.db"))
    local rows = db:llm_calls(s1.memory_run_id)
    expect.eq(#rows, s1.replay.calls)
    for _, row in ipairs(rows) do expect.eq(row.replayed, true, "row " .. row.seq .. " replayed") end
    expect.truthy(rows[1].place:find("^beam/1/"), "the place names policy and round: " .. rows[1].place)
    db:close()
    expect.truthy(fs.exists(replayed .. "/report.html"), "the report of the replayed run")
  end, { timeout = 900 })

  it("is strict: a question with no recorded answer stops its branch, is listed, and the run exits 4", function()
    setup()
    local r = fake.run_agent("beam.lua", session.argv(dir .. "/miss"), session.env(session.DEAD_PORT, dir, "replay",
      { KAGENT_MODEL = "openai:another-model" }), 900)
    expect.eq(r.code, 4, "exit status of a strict replay with misses\n" .. r.stderr:sub(-2000))
    expect.match(r.stderr, "strict replay: %d+ of %d+ LLM call%(s%) had no recorded answer")
    local run = fake.newest_run(dir .. "/miss")
    local s = json.decode(fs.read(run .. "/summary.json"))
    expect.eq(s.replay.hits, 0)
    expect.eq(s.replay.sent, 0, "nothing was sent")
    expect.eq(s.replay.misses, s.replay.calls)
    local misses = json.decode(fs.read(run .. "/replay_misses.json"))
    expect.eq(#misses, s.replay.misses)
    expect.eq(misses[1].policy, "beam")
    local st = json.decode(fs.read(run .. "/state.json"))
    expect.truthy(#st.attempts > 0)
    for _, a in ipairs(st.attempts) do
      expect.eq(a.stage, "replay", string.format("r%dw%d stopped where the replay had no answer", a.round, a.worker))
    end
  end, { timeout = 900 })

  -- generate.lua and fuse.lua answer a strict replay's misses as the search does: exit 4, listed
  for _, name in ipairs({ "generate", "fuse" }) do
    it("(" .. name .. ".lua) exits 4 too when a strict replay had no recorded answer, listing the misses", function()
      if not fake.cpu().have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
      local d = spec.tmpdir("replay-" .. name)
      local r = fake.run_agent(name .. ".lua", { "--problem", kagent.root .. "/examples/problems/rmsnorm_small.py",
        "--devices", "cpu", "--out", d .. "/runs" }, session.env(session.DEAD_PORT, d, "replay"), 600)
      expect.eq(r.code, 4, r.stderr:sub(-2000))
      expect.match(r.stderr, "strict replay: %d+ of %d+ LLM call%(s%) had no recorded answer")
      local run = fake.newest_run(d .. "/runs")
      local s = json.decode(fs.read(run .. "/summary.json"))
      expect.truthy(s.replay.misses > 0 and s.replay.sent == 0, "missed, nothing sent: " .. json.encode(s.replay))
      expect.eq(#json.decode(fs.read(run .. "/replay_misses.json")), s.replay.misses)
    end, { timeout = 600 })
  end
end)
