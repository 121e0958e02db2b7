-- Several models in one run, on the CPU against the FAKE LLM server: one model diagnoses and
-- reflects, two FAKE models take turns as workers, and the second writes worse kernels (wrong
-- ones, which it cannot repair).
-- summary.json and report.html give each model its attempts, improvements (and share of them),
-- the best kernel, tokens and cost, a model without a price has an unknown cost, and every call
-- went to the model its role names. Needs a python with torch (KAGENT_PYTHON).
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. kagent.root .. "/?.lua;" .. package.path
local fs, json = kagent.fs, kagent.json
local fake = require("fake_session")
local fake_llm = dofile(kagent.root .. "/tests/fixtures/fake_llm/fake.lua")
local models = require("agents.run.models")
local cpu = fake.cpu()

local EV = { { metric = "time_ms", value = 1, interpretation = "slow" } }
local function direction(tag, skill)
  return { category = "memory", summary = tag .. ": statistics in a Python loop", skill = skill, reasoning = "many small ops",
    root_causes = { { cause = "loop", evidence = EV } }, recommended_fixes = { { fix = "one pass", rationale = "fewer ops" } } }
end

local SCRIPT = { latency = 0, replies = {
  { model = "fake-judge", match = "# BOTTLENECK ANALYSIS", text = fake.fenced({ bottlenecks = {
    direction("DIRECTION_ALPHA", "fusion"), direction("DIRECTION_BETA", "ilp") } }) },
  { model = "fake-judge", match = "# REFLEXION", text = fake.fenced({ was_fix_effective = true, lessons = { "scripted" },
    reasoning = "scripted" }) },
  -- the good worker writes the fast kernel, the worse one a wrong kernel it cannot repair,
  -- whatever the direction
  { model = "fake-good", match = "# OPTIMIZE KERNEL", text = cpu.code_block("fast.py") },
  { model = "fake-bad", match = "# OPTIMIZE KERNEL", text = cpu.code_block("broken.py") },
  { model = "fake-bad", match = "# REFINE KERNEL", text = cpu.code_block("broken.py") },
  -- a call that reaches no rule of its model is a routing mistake: it answers nothing usable
  { text = "ROUTED TO THE WRONG MODEL" },
} }

describe("--model per role", function()
  it("parses roles, mixtures and weights, and refuses what it cannot use", function()
    local p = assert(models.parse({ "openai:a", "diagnose=openai:j", "worker=openai:g*2,openai:b" }))
    expect.eq(p.default, "openai:a")
    expect.eq(models.pick(p, "diagnose", {}, 1), "openai:j")
    expect.eq(models.pick(p, "reflect", {}, 1), nil, "the run's default")
    local turns = {}
    for k = 1, 3 do turns[k] = models.pick(p, "optimize", { worker = k }, 1) end
    expect.eq(table.concat(turns, " "), "openai:g openai:g openai:b")
    expect.eq(models.pick(p, "refine", { worker = 3 }, 1), "openai:b", "a worker keeps its model for repairs")
    expect.match(select(2, models.parse({ "optimise=openai:x" })), "did you mean 'optimize'")
    expect.match(select(2, models.parse({ "openai:a", "openai:b" })), "two models for every role")
    expect.match(select(2, models.parse({ "worker=openai:a", "worker=openai:b" })), "given twice")
  end)

  it("runs three models in one beam search and reports what each did", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("models")
    local srv = fake_llm.start({ script = SCRIPT })
    local prices = dir .. "/prices.json"
    fs.write(prices, json.encode({ ["fake-judge"] = { input = 1, output = 2 }, ["fake-good"] = { input = 3, output = 4 } }))
    local e = cpu.env(dir, srv.port)
    e.KAGENT_MODEL = false
    local r = fake.run_agent("beam.lua", { "--problem", cpu.problem, "--kernel", cpu.fx .. "slow.py", "--devices", "cpu",
      "--out", dir .. "/runs", "--rounds", "2", "--beam", "1", "--directions", "2", "--finalists", "1", "--refine", "1",
      "--model", "openai:fake-judge", "--model", "worker=openai:fake-good,openai:fake-bad", "--prices", prices }, e, 900)
    local st = srv:stats(true)
    srv:stop()
    expect.eq(r.code, 0, r.stderr:sub(-3000))
    for _, b in ipairs(st.bodies) do
      local text = json.encode(b.messages)
      if text:find("# OPTIMIZE KERNEL", 1, true) or text:find("# REFINE KERNEL", 1, true) then
        expect.truthy(b.model == "fake-good" or b.model == "fake-bad", "a worker's call went to " .. tostring(b.model))
      else
        expect.eq(b.model, "fake-judge", "the other roles take the run's model")
      end
    end
    local rd = fake.newest_run(dir .. "/runs")
    local s = json.decode(assert(fs.read(rd .. "/summary.json")))
    local good, bad, judge = s.models["openai:fake-good"], s.models["openai:fake-bad"], s.models["openai:fake-judge"]
    expect.truthy(good and bad and judge, "every model has its entry: " .. json.encode(s.models))
    expect.eq(good.attempts, 2, "worker 1 in each of the two rounds")
    expect.eq(bad.attempts, 2, "worker 2 in each of the two rounds")
    expect.eq(bad.improved, 0, "the worse model's kernels never verify")
    expect.eq(bad.verified, 0)
    local gate = {}
    for _, a in ipairs(json.decode(assert(fs.read(rd .. "/state.json"))).attempts) do
      gate[#gate + 1] = string.format("r%dw%d %s: %s", a.round, a.worker, tostring(a.outcome), tostring(a.promotion or a.error))
    end
    expect.eq(good.improved, 1, "the fast kernel, once (then a duplicate): " .. table.concat(gate, "; "))
    expect.eq(good.share_improved, 1)
    expect.eq(bad.share_improved, 0)
    expect.eq(good.best, true, "the best kernel is the good model's")
    expect.eq(judge.attempts, 0)
    expect.truthy(judge.calls >= 3 and good.calls == 2 and bad.calls == 4, "a call per rewrite and repair: " .. json.encode(s.models))
    expect.truthy(type(good.cost_usd) == "number" and good.cost_usd > 0, "priced by --prices")
    expect.eq(bad.cost_usd, json.null, "no price: the cost is unknown (null), not 0")
    local html = assert(fs.read(rd .. "/report.html"))
    expect.match(html, 'id="models"')
    expect.match(html, "openai:fake%-bad")
    expect.match(html, "unknown %(no price%)")
    expect.match(html, "100%%", "the good model's share of the improvements")
  end, { timeout = 900 })
end)
