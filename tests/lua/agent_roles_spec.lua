-- The roles as functions of their inputs: each driven here by a small FAKE run (a FAKE evaluator
-- pool whose verdict the candidate's text decides, a FAKE LLM module that answers from a list and
-- records what it was sent). No Python, no network.
package.path = kagent.root .. "/?.lua;" .. kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fake_chat = require("fake_chat")
local fs, json = kagent.fs, kagent.json
local run_lib = require("agents.run")
local rundir = require("agents.run.rundir")
local verifier = require("agents.roles.verifier")
local auditor = require("agents.roles.auditor")
local judge = require("agents.roles.judge")
local optimizer = require("agents.roles.optimizer")
local reflector = require("agents.roles.reflector")

local function fake_run(replies, model)
  local fake_llm, sent = fake_chat(replies)
  local pool = { jobs = 0 }
  -- candidates are verified and timed (benchmark); evaluate adds the profile
  function pool:benchmark(job)
    self.jobs = self.jobs + 1
    if job.candidate:find("BROKEN") then return { ok = false, stage = "correctness", error = "EMISMATCH: off by one" } end
    return { ok = true, stage = "done", time_ms = { median = 1.0, p10 = 0.99, p90 = 1.01 } }
  end
  pool.evaluate = pool.benchmark
  local dir = spec.tmpdir("roles")
  local r = { opts = { refine = 2, max_tokens = 100 }, llm = fake_llm, model = model or "openai:fake", pool = pool,
    rd = assert(rundir.open(dir, "run")), problem_code = "class Model: pass", dtype = "fp32", gpu_text = "FAKE",
    can_profile = false, device_name = "fake", skills = require("agents.lib.skills").load(kagent.root .. "/skills") }
  run_lib.add_helpers(r)
  return r, sent, pool
end

local function py(code) return "```python\n" .. code .. "\n```" end
local parent = { id = "input", fingerprint = "fp", code = "print('parent')", result = { time_ms = { median = 2.0 } }, profile = {} }

describe("verifier", function()
  it("repairs a failing kernel with the whole chain in view and stops when it verifies", function()
    local run, sent, pool = fake_run({ py("BROKEN again"), py("fixed") })
    local v = verifier.run(run, "BROKEN", { dir = run.rd:path("w1") })
    expect.eq(v.ok, true)
    expect.eq(v.tries, 3)
    expect.eq(#v.chain, 2)
    expect.eq(v.chain[1].stage, "correctness")
    expect.eq(pool.jobs, 3)
    local second = sent[2].messages[1].content
    expect.match(second, "try 1 failed at correctness: EMISMATCH", "the second repair sees the first failure")
    expect.truthy(fs.exists(run.rd:path("w1/verify_2.json")))
  end)

  it("gives a reply without code the stage reply, and does not call the LLM with --refine 0", function()
    local run, sent = fake_run({})
    local v = verifier.run(run, nil, { dir = run.rd:path("w1") }, { max_refine = 0 })
    expect.eq(v.ok, false)
    expect.eq(v.result.stage, "reply")
    expect.match(v.result.error, "^ENOCODE")
    expect.eq(#sent, 0)
  end)
end)

describe("auditor", function()
  it("diagnoses first, then patches to the diagnosis", function()
    local run, sent = fake_run({ "```json\n" .. json.encode({ cause = "CAUSE_X", evidence = "e", fix = "FIX_Y" }) .. "\n```", py("patched") })
    local fix = auditor.repair(run, { code = "BROKEN", result = { stage = "run", error = "ERUN: boom" }, try = 1, max = 2,
      chain = {}, dir = run.rd:path("w1") })
    expect.eq(fix.code, "patched")
    expect.match(fix.diagnosis, "CAUSE_X %-> fix: FIX_Y")
    expect.match(sent[1].messages[1].content, "# AUDIT FAILURE")
    expect.match(sent[2].messages[1].content, "cause: CAUSE_X")
  end)
end)

describe("prompts of a parent's workers", function()
  it("send the parent's block first: its own cached message for Anthropic, one message otherwise", function()
    local run, sent = fake_run({ py("a") }, "anthropic:claude-sonnet-4-5")
    local prop = optimizer.propose(run, parent, { summary = "S", skill = "fusion" }, {})
    expect.eq(prop.code, "a")
    local m = sent[1].messages
    expect.eq(#m, 2)
    expect.eq(m[1].cache, true)
    expect.match(m[1].content, "## Current kernel")
    expect.match(m[2].content, "^# OPTIMIZE KERNEL")
    expect.match(prop.prompt, "## Current kernel.*# OPTIMIZE KERNEL", "the trace keeps the whole text")
    local run2, sent2 = fake_run({ py("b") })
    optimizer.propose(run2, parent, { summary = "S" }, {})
    expect.eq(#sent2[1].messages, 1)
    expect.match(sent2[1].messages[1].content, "^# CONTEXT.*# OPTIMIZE KERNEL")
  end)

  it("judge: one call, repeated directions dropped, gaps filled from the rules", function()
    local reply = "```json\n" .. json.encode({ bottlenecks = {
      { summary = "DRAM bound", category = "memory", skill = "coalescing" },
      { summary = "dram bound!", category = "memory", skill = "coalescing" } } }) .. "\n```"
    local run, sent = fake_run({ reply })
    local hits = { { skill = run.skills[1], prior = 0.5, score = 0.8, why = "untried" } }
    local list, prompt = judge.diagnose(run, parent, 2, { hits = hits })
    expect.eq(#sent, 1)
    expect.eq(#list, 2)
    expect.eq(list[2].source, "rules")
    expect.match(prompt, "# BOTTLENECK ANALYSIS")
  end)

  it("judge: a diagnosis that cannot be parsed is a warning for the trace, and the rules give the directions", function()
    local run = fake_run({ "The kernel is slow because of memory. {not json" })
    run.mem = { skill_stats = function() return {} end, history_text = function() return "(none)" end,
      lessons_text = function() return "(none)" end }
    local list, info = judge.directions(run, parent, 2)
    expect.truthy(#list >= 1, "directions from the skill rules")
    for _, d in ipairs(list) do expect.eq(d.source, "rules") end
    expect.truthy(info and info.diagnosis_warning:find("could not be parsed", 1, true), "the warning: " .. json.encode(info))
    expect.eq(info.directions_from, "skill rules")
    local run2 = fake_run({})
    run2.mem = run.mem
    run2.llm_guard.backoff = 0
    local _, info2 = judge.directions(run2, parent, 2)
    expect.truthy(info2.diagnosis_warning:find("the diagnosis call failed", 1, true), json.encode(info2))
  end)

  it("reflector: the LLM's verdict, or the measured outcome without an LLM", function()
    local a = { outcome = "improved", child_ms = 1, parent_ms = 2, skill = "fusion", code = "c", lesson = "one pass" }
    local run = fake_run({ "```json\n" .. json.encode({ lessons = { "L" }, was_fix_effective = true }) .. "\n```" })
    expect.eq(reflector.reflect(run, parent, a).lessons[1], "L")
    local offline = reflector.reflect({}, parent, a)
    expect.eq(offline.lessons[1], "one pass helped (improved)")
  end)
end)
