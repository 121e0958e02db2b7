-- At the end of a run, a kernel that generalizes wins over one that does not when their figures
-- are within noise (agents/search/prefer_general.lua, called by confirm.final). Driven through
-- confirm.final with a FAKE pool: its interleaved comparison returns the figures each test sets,
-- and its confirmation jobs say "no" to the resized problem for the kernels named CACHED*, so the
-- order of the finalists, not a machine's timing, decides.
package.path = kagent.root .. "/?.lua;" .. package.path
local confirm = require("agents.search.confirm")
local prefer_general = require("agents.search.prefer_general")
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fake = require("fake_confirm")

-- fake_pool(figures): figures[code] = {median, p10, p90} of the interleaved comparison; every
-- job is recorded as {op, code, generalize}
local function fake_pool(figures)
  local p = { jobs = {} }
  function p:compare(job)
    local cands = {}
    for i, code in ipairs(job.candidates) do cands[i] = { time_ms = figures[code] } end
    self.jobs[#self.jobs + 1] = { op = "compare" }
    return { ok = true, stage = "done", candidates = cands }
  end
  function p:benchmark(job)
    self.jobs[#self.jobs + 1] = { op = "benchmark", code = job.candidate, generalize = job.generalize }
    local t = figures[job.candidate] or { median = 2.0, p10 = 1.99, p90 = 2.01 }
    local r = { ok = true, stage = "done", time_ms = t, baseline_times = {} }
    if job.generalize then
      local cached = job.candidate:find("^CACHED") ~= nil
      r.generalizes = cached and "no" or "yes"
      r.generalization = cached and { { sizes = { batch_size = 7 }, reason = "fake: wrong at batch 7" } } or nil
    end
    return r
  end
  p.evaluate = p.benchmark
  return p
end

local fake_run, kernel = fake.run, fake.kernel

local function confirmed_codes(pool)
  local out = {}
  for _, j in ipairs(pool.jobs) do if j.op == "benchmark" and j.generalize then out[#out + 1] = j.code end end
  return table.concat(out, ",")
end

local function fig(m) return { median = m, p10 = m * 0.99, p90 = m * 1.01 } end

describe("the final confirmation's tie-break on shapes", function()
  it("prefers a kernel that generalizes over a faster one that does not, within noise", function()
    local pool = fake_pool({ CACHED = fig(1.000), GENERAL = fig(1.008), IN = fig(2.0) })
    local out = confirm.final(fake_run(pool), { kernel("CACHED"), kernel("GENERAL") }, kernel("IN"))
    expect.eq(out.confirmed, true)
    expect.eq(out.kernel.code, "GENERAL")
    expect.eq(out.result.generalizes, "yes")
    expect.eq(confirmed_codes(pool), "CACHED,GENERAL", "both confirmed, the faster first")
    expect.eq(out.preferred.over, "cached")
    expect.match(out.preferred.reason, "general generalizes and cached does not")
    expect.eq(#out.tried, 2)
    expect.eq(out.tried[2].generalizes, "yes")
    expect.eq(#out.phases.finalists, 2, "the second confirmation's time is counted")
  end)

  it("keeps a clearly faster kernel that does not generalize", function()
    local pool = fake_pool({ CACHED = fig(1.0), GENERAL = fig(1.5), IN = fig(2.0) })
    local out = confirm.final(fake_run(pool), { kernel("CACHED"), kernel("GENERAL") }, kernel("IN"))
    expect.eq(out.kernel.code, "CACHED")
    expect.eq(out.result.generalizes, "no")
    expect.eq(out.preferred, nil)
    expect.eq(confirmed_codes(pool), "CACHED", "the slower kernel is not confirmed")
  end)

  it("keeps the faster of two that do not generalize", function()
    local pool = fake_pool({ CACHED_A = fig(1.0), CACHED_B = fig(1.005), IN = fig(2.0) })
    local out = confirm.final(fake_run(pool), { kernel("CACHED_A"), kernel("CACHED_B") }, kernel("IN"))
    expect.eq(out.kernel.code, "CACHED_A")
    expect.eq(out.preferred, nil)
    expect.eq(confirmed_codes(pool), "CACHED_A,CACHED_B")
  end)

  it("does not confirm again a finalist refused before the result confirmed on a later pass", function()
    local pool = fake_pool({ CACHED = fig(1.0), REFUSED = fig(1.004), IN = fig(2.0) })
    local bench, noisy = pool.benchmark, true
    function pool:benchmark(job)
      if job.candidate == "CACHED" and noisy then  -- not measured once (confirm.lua's passes)
        noisy = false
        self.jobs[#self.jobs + 1] = { op = "benchmark", code = job.candidate, generalize = job.generalize }
        return { ok = false, stage = "timing", code = "ENOISY", error = "ENOISY: fake" }
      end
      if job.candidate == "REFUSED" then
        self.jobs[#self.jobs + 1] = { op = "benchmark", code = job.candidate, generalize = job.generalize }
        return { ok = false, stage = "correctness", code = "EMISMATCH", error = "EMISMATCH: fake" }
      end
      return bench(self, job)
    end
    local out = confirm.final(fake_run(pool), { kernel("CACHED"), kernel("REFUSED") }, kernel("IN"))
    expect.eq(out.kernel.code, "CACHED")
    expect.eq(confirmed_codes(pool), "CACHED,REFUSED,CACHED", "REFUSED once, in the first pass")
  end)

  it("confirms nothing more where the fastest generalizes", function()
    local pool = fake_pool({ GENERAL = fig(1.0), CACHED = fig(1.001), IN = fig(2.0) })
    local out = confirm.final(fake_run(pool), { kernel("CACHED"), kernel("GENERAL") }, kernel("IN"))
    expect.eq(out.kernel.code, "GENERAL")
    expect.eq(confirmed_codes(pool), "GENERAL")
  end)
end)

describe("prefer_general.within_noise", function()
  it("reads the interleaved figure, else the search's, and needs both", function()
    local a = { final_rank_time = fig(1.0) }
    expect.eq(prefer_general.within_noise(a, { final_rank_time = fig(1.005) }), true)
    expect.eq(prefer_general.within_noise(a, { final_rank_time = fig(1.2) }), false)
    expect.eq(prefer_general.within_noise(a, { result = { time_ms = fig(1.005) } }), true)
    expect.eq(prefer_general.within_noise(a, {}), false)
  end)
end)
