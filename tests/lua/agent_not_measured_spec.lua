-- "Not measured" (ENOISY: the evaluator's control was as noisy as the kernel, docs/lua-api.md) is
-- no verdict on a kernel: the verifier measures the same code again instead of repairing it, and
-- the final confirmation confirms such a finalist again after the others; a run ends "no confirmed
-- kernel" (exit 5) only when every finalist was refused for what it did, else not_measured (exit
-- 7). Driven with a FAKE pool whose answers each test scripts per kernel.
package.path = kagent.root .. "/?.lua;" .. package.path
local confirm = require("agents.search.confirm")
local verdict = require("agents.lib.verdict")
local verifier = require("agents.roles.verifier")
local rundir = require("agents.run.rundir")
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fake = require("fake_confirm")

local NOISY = { ok = false, stage = "timing", code = "ENOISY", checks = { values = true },
  error = "ENOISY: not measured: the GPU was too noisy (4 rounds, 14 s of waits)" }
local REFUSED = { ok = false, stage = "timing", code = "EUNTRUSTED",
  error = "EUNTRUSTED: the timed calls vary too much (p90/p10 above the limit)" }

-- fake_pool(script): script[code] = list of answers, one per job of that code, in order (the last
-- repeats); "ok" is a verified result. Records each job's code.
local function fake_pool(script)
  local p = { jobs = {} }
  function p:compare(job)
    local cands = {}
    for i = 1, #job.candidates do cands[i] = { time_ms = { median = i, p10 = i, p90 = i } } end
    return { ok = true, stage = "done", candidates = cands }
  end
  function p:benchmark(job)
    self.jobs[#self.jobs + 1] = job.candidate
    local n = 0
    for _, c in ipairs(self.jobs) do if c == job.candidate then n = n + 1 end end
    local answers = script[job.candidate] or { "ok" }
    local a = answers[math.min(n, #answers)]
    if a == "ok" then
      return { ok = true, stage = "done", time_ms = { median = 1.0, p10 = 0.99, p90 = 1.01 }, baseline_times = {},
        generalizes = "yes" }
    end
    return a
  end
  p.evaluate = p.benchmark
  return p
end

local function fake_run(pool)
  local r = fake.run(pool, { refine = 2 }, assert(rundir.open(spec.tmpdir("not-measured"), "run")))
  r.llm = function() error("no LLM call is expected: a kernel not measured is not repaired") end
  return r
end
local kernel = fake.kernel

local function count(list, x)
  local n = 0
  for _, v in ipairs(list) do if v == x then n = n + 1 end end
  return n
end

describe("a result not measured", function()
  it("is told apart from a refusal", function()
    expect.truthy(verdict.not_measured(NOISY))
    expect.falsy(verdict.not_measured(REFUSED))
    expect.falsy(verdict.not_measured({ ok = true }))
  end)
end)

describe("the verifier and a kernel not measured", function()
  it("measures the same code again and keeps it once it is measured", function()
    local pool = fake_pool({ K = { NOISY, "ok" } })
    local v = verifier.run(fake_run(pool), "K", { dir = "w1" })
    expect.eq(v.ok, true)
    expect.eq(v.tries, 1, "one try: the machine's noise spent no repair")
    expect.eq(count(pool.jobs, "K"), 2)
  end)

  it("never sends it for repair, and stops after NOT_MEASURED_TRIES more", function()
    local pool = fake_pool({ K = { NOISY } })
    local v = verifier.run(fake_run(pool), "K", { dir = "w1" })
    expect.eq(v.ok, false)
    expect.eq(v.result.code, "ENOISY")
    expect.eq(#v.chain, 0, "no repair")
    expect.eq(count(pool.jobs, "K"), 1 + verifier.NOT_MEASURED_TRIES)
  end)
end)

describe("the final confirmation and a finalist not measured", function()
  it("confirms it again after the others, and it can win", function()
    local pool = fake_pool({ A = { NOISY, "ok" }, B = { REFUSED } })
    local out = confirm.final(fake_run(pool), { kernel("A"), kernel("B") }, kernel("IN"))
    expect.eq(out.confirmed, true)
    expect.eq(out.kernel.code, "A")
    expect.eq(table.concat(pool.jobs, ","):sub(1, 5), "A,B,A", "A again only after B")
    expect.eq(out.tried[3].pass, 1)
    expect.eq(out.not_measured, nil)
  end)

  it("ends not measured, not refused, where one stays unmeasured after its passes", function()
    local pool = fake_pool({ A = { NOISY }, B = { REFUSED } })
    local out = confirm.final(fake_run(pool), { kernel("A"), kernel("B") }, kernel("IN"))
    expect.eq(out.confirmed, false)
    expect.eq(out.not_measured, true)
    expect.eq(count(pool.jobs, "A"), 1 + confirm.NOT_MEASURED_PASSES, "bounded")
    expect.eq(count(pool.jobs, "B"), 1, "a refused finalist is not confirmed again")
    expect.match(confirm.unconfirmed_line(out.tried, out.not_measured),
      "^no confirmed kernel: not measured, the machine was too noisy")
  end)

  it("ends no confirmed kernel only when every finalist was refused for what it did", function()
    local pool = fake_pool({ A = { REFUSED }, B = { REFUSED } })
    local out = confirm.final(fake_run(pool), { kernel("A"), kernel("B") }, kernel("IN"))
    expect.eq(out.confirmed, false)
    expect.eq(out.not_measured, nil)
    expect.eq(#pool.jobs, 2)
    expect.match(confirm.unconfirmed_line(out.tried, out.not_measured), "^no confirmed kernel: a at timing: EUNTRUSTED")
  end)
end)
