-- The router of agents/fuse.lua (agents/roles/router.lua): its rules on a hand-made analysis
-- (tests/fixtures/fuse/hand_analysis.lua), the vote a FAKE LLM (a list of replies,
-- tests/fixtures/agent/fake_chat.lua) casts, and the memory of what worked. No Python, no network.
package.path = kagent.root .. "/?.lua;" .. kagent.root .. "/tests/fixtures/fuse/?.lua;"
  .. kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local json = kagent.json
local router = require("agents.roles.router")
local run_lib = require("agents.run")
local rundir = require("agents.run.rundir")
local fake_chat = require("fake_chat")
local hand = require("hand_analysis")

local S, op, analysis = hand.S, hand.op, hand.analysis

describe("router", function()
  it("takes the direct path when the analysis leaves no other", function()
    local a = analysis()
    a.traced, a.trace_error = false, "TraceError: control flow"
    local s = router.static(a)
    expect.eq(s.path, "direct")
    expect.eq(s.hard, true)
    expect.match(s.reasons[1], "could not be traced")
    a = analysis()
    a.decomposable, a.unsupported = false, { { node = "attn", reason = "no functional form" } }
    expect.match(router.static(a).reasons[1], "no functional form %(op attn%)")
    a = analysis()
    a.ops = { a.ops[1] }
    expect.match(router.static(a).reasons[1], "one compute op")
  end)

  it("scores heavy ops, reductions, attention and epilogues", function()
    local s = router.static(analysis())
    expect.eq(s.path, "decompose", "two GEMMs")
    expect.eq(s.score, 2)
    local a = analysis()
    for i = 3, 5 do a.ops[i] = nil end
    a.outputs = { "relu" }
    s = router.static(a)
    expect.eq(s.path, "direct")
    expect.eq(s.score, -2)
    expect.match(s.reasons[1], "epilogue")
    -- q @ k^T -> softmax -> @ v is attention even when written out
    a = analysis()
    a.ops[2] = op("relu", { op = "softmax", category = "softmax", shape = S, inputs = { "lin" }, expr = "torch.softmax(${v:lin}, -1)" })
    local f = router.features(a)
    expect.eq(f.attention, true)
    s = router.static(a)
    expect.truthy(s.score >= 5, "heavy ops, attention and a reduction: " .. s.score)
  end)

  local function fake_run(replies, db)
    local fake_llm, sent = fake_chat(replies)
    local r = { opts = { max_tokens = 100 }, model = "openai:fake", problem_code = "class Model: pass", dtype = "fp32",
      gpu_text = "FAKE", can_profile = false, device_name = "fake", rd = assert(rundir.open(spec.tmpdir("router"), "run")),
      skills = require("agents.lib.skills").load(kagent.root .. "/skills"),
      llm = fake_llm, db = db, mem = { info = { problem_hash = "h1" } } }
    run_lib.add_helpers(r)
    return r, sent
  end

  it("lets a vote decide a tie and not a clear score; remembers what worked", function()
    local db = assert(kagent.mem.open(":memory:"))
    local a = analysis()
    for i = 3, 5 do a.ops[i] = nil end
    a.outputs = { "relu" }
    local run, sent = fake_run({ '{"route": "decompose", "reason": "two passes"}' }, db)
    local r = router.decide(run, a, { vote = true })
    expect.eq(r.path, "decompose", "rules -2, vote +2: a tie goes to the vote")
    expect.eq(r.decided_by, "rules and vote")
    expect.match(sent[1].messages[1].content, "# ROUTE")
    expect.match(sent[1].messages[1].content, "The rules say %*%*direct%*%*")
    run = fake_run({ '{"route": "direct"}' }, db)
    r = router.decide(run, analysis(), { vote = true })
    expect.eq(r.path, "direct", "rules +2, vote -2: a tie, the vote")
    local b = analysis()
    b.ops[#b.ops + 1] = op("bn", { op = "BatchNorm1d", category = "norm", shape = S, inputs = { "add" }, expr = "${v:add}" })
    b.outputs = { "bn" }
    run = fake_run({ '{"route": "direct"}' }, db)
    r = router.decide(run, b, { vote = true })
    expect.eq(r.path, "decompose", "rules +3 outweigh the vote")
    run = fake_run({ "no json here" }, db)
    r = router.decide(run, analysis(), { vote = true })
    expect.eq(r.decided_by, "rules", "a reply without a route leaves the rules")
    expect.match(r.vote.error, "no route")
    expect.eq(router.decide(fake_run({}, db), analysis(), { force = "direct" }).decided_by, "option")

    -- memory: the newest finished fuse run of this problem whose route gave a verified program
    local id = db:start_run({ problem = "p.py", problem_hash = "h1", gpu = "cpu", policy = "fuse" })
    db:finish_run(id, "done", { route = { final = "direct" } })
    local failed = db:start_run({ problem = "p.py", problem_hash = "h1", gpu = "cpu", policy = "fuse" })
    db:finish_run(failed, "failed", { route = { final = json.null } })
    run, sent = fake_run({}, db)
    r = router.decide(run, analysis(), { vote = true })
    expect.eq(r.path, "direct")
    expect.eq(r.decided_by, "memory")
    expect.eq(r.cached_from, id)
    expect.eq(#sent, 0, "no vote asked")
    a = analysis()
    a.traced = false
    expect.eq(router.decide(run, a, { vote = true }).decided_by, "analysis", "memory never overrides what the analysis rules out")
    expect.eq(router.decide(run, analysis(), { vote = true, cache = false }).decided_by, "rules")
  end)
end)
