-- The reviewer (--review, agents/search/review.lua and agents/run/review_inputs.lua) end to end on the CPU: agents/beam.lua against the
-- FAKE LLM server (tests/fixtures/fake_llm/server.py), whose scripted reviewer proposes a
-- transposed input (and one outside the problem's contract). The optimizer's rewrite is fast and
-- passes every regular trial but reads its input as if it were contiguous
-- (tests/fixtures/eval/review/contiguous_only.py). With --review final it is refused through the
-- reviewer's input, the run ends on the correct start kernel, and the input is stored; a later run
-- on the same problem, without --review, asks no reviewer and refuses the same rewrite through
-- the stored input. Needs a python with torch (KAGENT_PYTHON).
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs, json, proc = kagent.fs, kagent.json, kagent.proc
local fake = require("fake_session")
local cpu = fake.cpu()
local root = kagent.root

local BAD = root .. "/tests/fixtures/eval/review/contiguous_only.py"
local REVIEW_TITLE = "# REVIEW: INPUTS THAT SHOULD BREAK THIS KERNEL"  -- prompts/review.md

local function script()
  local bn = { category = "memory", summary = "DIRECTION_ALPHA: the channel loop", skill = "fusion",
    reasoning = "many small ops", root_causes = { { cause = "a loop over channels", evidence = {} } },
    recommended_fixes = { { fix = "one pass", rationale = "fewer ops" } } }
  return { latency = 0, replies = {
    { match = REVIEW_TITLE, text = fake.fenced({ proposals = {
      { id = "transposed", why = "the kernel ignores strides", calls = { { inputs = { { layout = "transposed" } } } } },
      { id = "minus", why = "negative inputs", calls = { { inputs = { { values = "negative" } } } } } } }) },
    { match = "# BOTTLENECK ANALYSIS", text = fake.fenced({ bottlenecks = { bn } }) },
    { match = "# REFLEXION", text = fake.fenced({ was_diagnosis_correct = true, was_fix_effective = true,
      expected_outcome = "faster", actual_outcome = "see numbers", reasoning = "scripted", lessons = {},
      avoid_patterns = {}, try_patterns = {} }) },
    { match = "DIRECTION_ALPHA", text = "One pass.\n```python\n" .. assert(fs.read(BAD)) .. "```\n" },
  } }
end

local function stats(port)
  local r = assert(proc.run({ "python3", "-c", "import urllib.request;print(urllib.request.urlopen("
    .. "'http://127.0.0.1:" .. port .. "/_stats?texts=1').read().decode())" }))
  return json.decode(r.stdout)
end

local function review_calls(st)
  local n = 0
  for _, t in ipairs(st.texts or {}) do if t:find(REVIEW_TITLE, 1, true) then n = n + 1 end end
  return n
end

local function beam(dir, port, out, more)
  local argv = { "--problem", cpu.problem, "--kernel", root .. "/examples/kernels/cpu/rmsnorm_small_chunked.py",
    "--rounds", "1", "--directions", "1", "--refine", "0", "--devices", "cpu", "--out", dir .. "/" .. out }
  for _, a in ipairs(more or {}) do argv[#argv + 1] = a end
  local r = fake.run_agent("beam.lua", argv, cpu.env(dir, port), 600)
  local rd = fake.newest_run(dir .. "/" .. out)
  return r, rd, rd and json.decode(fs.read(rd .. "/summary.json") or "null")
end

describe("the reviewer (--review) on the CPU with the fake LLM server", function()
  it("refuses a kernel wrong only on a transposed input, ends on a correct one, and keeps the input", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir(string.format("agent-review-%06d", math.floor((kagent.time.now() % 1) * 1e6)))
    local server, port = fake.start(script(), dir)

    local r, rd, s = beam(dir, port, "runs1", { "--review", "final" })
    local st1 = stats(port)
    if r.code ~= 0 then server:kill(); error("beam.lua exited " .. r.code .. "\n" .. r.stderr:sub(-3000)) end
    local w1 = json.decode(assert(fs.read(rd .. "/rounds/round_1/w1/verify_0.json")))
    expect.eq(w1.ok, true, "the rewrite passes the regular trials: " .. tostring(w1.error))
    expect.eq(s.verified, true)
    expect.eq(s.best.id, "input", "the rewrite is never the result")
    local refused = s.review.refused_kernels
    if #refused == 0 then
      -- CPU timing noise ranked the start kernel first, so it was confirmed first and the rewrite
      -- never came to be reviewed: that says nothing of the reviewer
      server:kill()
      skip("the fast rewrite was not ranked first on this loaded machine: " .. json.encode(s.confirmation))
    end
    expect.eq(s.review.mode, "final")
    expect.eq(refused[1].kernel, "r1w1", "the rewrite is refused")
    expect.match(refused[1].error, "^EREVIEW: reviewer input transposed, call 1 of 1")
    expect.eq(s.confirmation[1].stage, "review", "its confirmation stops at the review")
    expect.eq(s.review.refused_proposals >= 1, true, "the proposal outside the contract is the reply's failure")
    expect.eq(s.review.inputs_added, 1)
    local stored = json.decode(assert(fs.read(rd .. "/review/inputs.json"))).inputs
    expect.eq(#stored, 1)
    expect.eq(stored[1].calls[1].inputs[1].layout, "transposed", "the reviewer's input is stored as proposed")
    expect.eq(refused[1].input, stored[1].id)
    local v = json.decode(assert(fs.read(rd .. "/review/1_r1w1/verdict.json")))
    expect.eq(v.failed.id, "transposed")
    expect.match(v.refused[1].reason, "it is never negative")
    -- the run's result: the start kernel, reviewed too, its confirmation job running the stored input
    local best = json.decode(assert(fs.read(rd .. "/best_eval.json")))
    expect.eq(best.ok, true)
    expect.eq(best.review.passed[1], stored[1].id, "the stored input is a trial of the confirmation")
    expect.eq(review_calls(st1), 2, "the rewrite and the start kernel were each reviewed once")

    -- a later run on the same problem, --review off (the default): no reviewer call, and the same
    -- rewrite is refused by the stored input alone
    assert(proc.run({ "python3", "-c", "import urllib.request;urllib.request.urlopen(urllib.request.Request("
      .. "'http://127.0.0.1:" .. port .. "/_reset', method='POST'))" }))
    local r2, rd2, s2 = beam(dir, port, "runs2")
    local st2 = stats(port)
    server:kill()
    if r2.code ~= 0 then error("second beam.lua exited " .. r2.code .. "\n" .. r2.stderr:sub(-3000)) end
    expect.eq(review_calls(st2), 0, "no reviewer call without --review")
    expect.eq(s2.review.mode, "off")
    expect.eq(s2.review.inputs_in_trials, 1)
    local w2 = json.decode(assert(fs.read(rd2 .. "/rounds/round_1/w1/verify_0.json")))
    expect.eq(w2.code, "EREVIEW", "the rewrite meets the stored input among its trials: " .. tostring(w2.error))
    expect.eq(w2.review.failed.id, stored[1].id)
    expect.eq(s2.best.id, "input")
  end, { timeout = 900 })
end)
