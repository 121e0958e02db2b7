-- Measurements reused across runs (agents/search/measured.lua through agents/search/confirm.lua) with a
-- FAKE evaluator pool that measures only the baselines a job asks for and records every job:
-- the baselines cache (a second run reuses them after an eager re-check; a changed key or a
-- failed re-check measures them again) and a kernel's confirmation verdicts (reused on its
-- second confirmation, whose figure is still measured). No Python.
package.path = kagent.root .. "/?.lua;" .. package.path
local json = kagent.json
local confirm = require("agents.search.confirm")
local measured = require("agents.search.measured")
local run_lib = require("agents.run")
local attempt = require("agents.search.attempt")

-- A FAKE pool. eager: the eager median it measures (a field, so a test can move it); each job
-- is recorded as {op, baselines = the names asked, sanitize, generalize}.
local function fake_pool()
  local p = { eager = 1.0, jobs = {} }
  local function result(self, op, job)
    local names = job.bench and job.bench.baselines or {}
    self.jobs[#self.jobs + 1] = { op = op, baselines = table.concat(names, ","), sanitize = job.sanitize,
      generalize = job.generalize }
    local r = { ok = true, stage = "done", fingerprint = "fp:" .. job.candidate,
      time_ms = { median = 0.5, p10 = 0.499, p90 = 0.501 }, baseline_times = {} }
    local figs = { eager = self.eager, compile = 0.8, compile_max_autotune = 0.7 }
    for _, n in ipairs(names) do
      r[n .. "_ms"] = figs[n]
      r.baseline_times[n] = { median = figs[n] }
      r["speedup_vs_" .. n] = figs[n] / 0.5
    end
    if job.sanitize then r.sanitizer = { ok = true, tools = { "memcheck" } } end
    if job.generalize then r.generalizes = "yes" end
    return r
  end
  function p:evaluate(job) return result(self, "evaluate", job) end
  function p:benchmark(job) return result(self, "benchmark", job) end
  return p
end

-- a run of the fake pool on one memory database; opts override the run's options; names: the
-- baselines the fake evaluator's ready line states (`baselines`; `reported_baselines` eager and
-- torch.compile)
local function fake_run(db, pool, o, names)
  local opts = { job_timeout = 60, metrics = "sol" }
  for k, v in pairs(o or {}) do opts[k] = v end
  local r = { opts = opts, problem_path = "/nonexistent/problem.py", problem_code = "class Model: pass\n",
    dtype = opts.dtype or "fp32", pool = pool, db = db, device_name = "FAKE GPU", can_profile = true,
    devices = { { device = 0, torch = "2.fake", triton = "3.fake",
      baselines = names or { "eager", "compile", "compile_max_autotune" }, reported_baselines = { "eager", "compile" } } } }
  run_lib.add_helpers(r)
  return r
end

local function last(pool) return pool.jobs[#pool.jobs] end

describe("baselines kept in memory", function()
  it("are measured on the first run and reused on the second after an eager re-check", function()
    local db = assert(kagent.mem.open(spec.tmpdir("measured") .. "/mem.db"))
    local pool = fake_pool()
    local r1 = confirm.input(fake_run(db, pool), "K1")
    expect.eq(last(pool).baselines, "eager,compile", "first run: both measured in the job")
    expect.eq(r1.baselines_source, "measured")
    -- a second run (another run table, same database): the job times eager only
    local r2 = confirm.input(fake_run(db, pool), "K2")
    expect.eq(last(pool).baselines, "eager", "second run: eager only, the re-check")
    expect.eq(r2.baselines_source, "cached")
    expect.eq(r2.compile_ms, 0.8, "torch.compile's figure from the cache")
    expect.near(r2.speedup_vs_compile, 0.8 / 0.5, 1e-9, "and its speedup")
    expect.eq(r2.eager_ms, 1.0)
    db:close()
  end)

  it("are measured again when the re-check disagrees by more than 2%", function()
    local db = assert(kagent.mem.open(spec.tmpdir("measured-recheck") .. "/mem.db"))
    local pool = fake_pool()
    confirm.input(fake_run(db, pool), "K1")
    pool.eager = 1.015  -- within 2%: reused
    expect.eq(confirm.input(fake_run(db, pool), "K2").baselines_source, "cached")
    pool.eager = 1.05   -- 5% off: everything is measured again
    local n = #pool.jobs
    local r = confirm.input(fake_run(db, pool), "K3")
    expect.eq(r.baselines_source, "remeasured")
    expect.match(r.baselines_recheck, "eager 1%.0500 ms now vs 1%.0000 ms cached")
    expect.eq(#pool.jobs, n + 2, "the re-check and a job measuring the baselines")
    expect.eq(pool.jobs[n + 2].baselines, "eager,compile")
    expect.eq(r.eager_ms, 1.05)
    -- the new figures replace the cached ones
    expect.eq(measured.baselines(fake_run(db, pool)).eager_ms, 1.05)
    expect.eq(confirm.input(fake_run(db, pool), "K4").baselines_source, "cached")
    db:close()
  end)

  it("missing from the cache are measured beside the re-check and join it", function()
    local db = assert(kagent.mem.open(spec.tmpdir("measured-missing") .. "/mem.db"))
    local pool = fake_pool()
    confirm.input(fake_run(db, pool), "K1")  -- the start: eager and torch.compile
    local run = fake_run(db, pool)
    local r = confirm.timed(run, "benchmark", "K2", nil, { "eager", "compile", "compile_max_autotune" })
    expect.eq(last(pool).baselines, "eager,compile_max_autotune", "torch.compile's figure is not timed again")
    expect.eq(r.baselines_source, "completed")
    expect.eq(r.compile_ms, 0.8)
    expect.eq(r.compile_max_autotune_ms, 0.7)
    expect.near(r.speedup_vs_compile, 0.8 / 0.5, 1e-9)
    expect.eq(measured.baselines(run).compile_max_autotune_ms, 0.7, "max-autotune joins the cache")
    r = confirm.timed(fake_run(db, pool), "benchmark", "K3", nil, { "eager", "compile", "compile_max_autotune" })
    expect.eq(last(pool).baselines, "eager")
    expect.eq(r.baselines_source, "cached")
    pool.eager = 1.05  -- a failed re-check: all of them are measured again
    local n = #pool.jobs
    r = confirm.timed(fake_run(db, pool), "benchmark", "K4", nil, { "eager", "compile", "compile_max_autotune" })
    expect.eq(r.baselines_source, "remeasured")
    expect.eq(pool.jobs[n + 2].baselines, "eager,compile,compile_max_autotune")
    db:close()
  end)

  it("are measured again under a changed key: dtype, GPU, torch", function()
    local db = assert(kagent.mem.open(spec.tmpdir("measured-key") .. "/mem.db"))
    local pool = fake_pool()
    confirm.input(fake_run(db, pool), "K1")
    expect.eq(confirm.input(fake_run(db, pool, { dtype = "bf16" }), "K1").baselines_source, "measured")
    local other = fake_run(db, pool)
    other.devices[1].torch = "2.other"
    expect.eq(confirm.input(other, "K1").baselines_source, "measured")
    local gpu = fake_run(db, pool)
    gpu.device_name = "FAKE GPU 2"
    expect.eq(confirm.input(gpu, "K1").baselines_source, "measured")
    local changed = fake_run(db, pool)
    changed.problem_code = "class Model: pass  # changed\n"
    expect.eq(confirm.input(changed, "K1").baselines_source, "measured")
    expect.eq(confirm.input(fake_run(db, pool), "K1").baselines_source, "cached", "the first key still holds")
    db:close()
  end)

  it("a failed kernel needs no baselines: its verdict comes back as is", function()
    local db = assert(kagent.mem.open(spec.tmpdir("measured-fail") .. "/mem.db"))
    local pool = fake_pool()
    confirm.input(fake_run(db, pool), "K1")
    function pool:evaluate(job)
      self.jobs[#self.jobs + 1] = { op = "evaluate", baselines = table.concat(job.bench.baselines, ",") }
      return { ok = false, stage = "correctness", error = "EMISMATCH: fake" }
    end
    local r = confirm.input(fake_run(db, pool), "BAD")
    expect.eq(r.ok, false)
    expect.eq(r.stage, "correctness")
    expect.eq(last(pool).baselines, "eager")
    db:close()
  end)
end)

describe("the baselines a run times", function()
  it("are those its evaluator's ready line names, not a list of the agents' own", function()
    local db = assert(kagent.mem.open(spec.tmpdir("measured-names") .. "/mem.db"))
    local pool = fake_pool()
    local run = fake_run(db, pool, nil, { "eager", "compile" })
    local function kernel(code) return attempt.kernel({ id = code, code = code, result = assert(run.pool:benchmark(run.job(code))) }) end
    expect.truthy(confirm.final(run, { kernel("KN") }, kernel("KNIN")).confirmed)
    expect.eq(pool.jobs[#pool.jobs - 1].baselines, "eager,compile", "the final confirmation times the stated ones")
    expect.eq(measured.baselines(run).compile_max_autotune_ms, nil, "and caches only those")
    db:close()
  end)
end)

describe("a kernel confirmed once", function()
  it("keeps its sanitizer and resized-problem verdicts; its figure and baselines are measured again", function()
    local db = assert(kagent.mem.open(spec.tmpdir("measured-confirm") .. "/mem.db"))
    local pool = fake_pool()
    local function kernel(run, code)
      local res = assert(run.pool:benchmark(run.job(code)))
      return attempt.kernel({ id = "k", code = code, result = res })
    end
    local run1 = fake_run(db, pool)
    local k = kernel(run1, "KFINAL")
    local input = kernel(run1, "KIN")
    local f1 = confirm.final(run1, { k }, input)
    expect.truthy(f1.confirmed)
    local first = pool.jobs[#pool.jobs - 1]  -- the confirmation, then the input's re-time
    expect.eq(first.sanitize, true)
    expect.eq(first.generalize, true)
    expect.eq(first.baselines, "eager,compile,compile_max_autotune")
    expect.eq(f1.result.verdicts_source, nil)
    expect.truthy(f1.phases.total_s >= 0 and f1.phases.finalists[1].wall_s >= 0)
    expect.same(f1.phases.finalists[1].reused, {})
    -- the same kernel confirmed by a later run
    local run2 = fake_run(db, pool)
    local f2 = confirm.final(run2, { kernel(run2, "KFINAL") }, kernel(run2, "KIN"))
    expect.truthy(f2.confirmed)
    local second = pool.jobs[#pool.jobs - 1]
    expect.eq(second.sanitize, false, "the sanitizer's verdict is reused")
    expect.eq(second.generalize, false, "so is the resized problem's")
    expect.eq(second.baselines, "eager", "the baselines are cached, eager re-checked")
    expect.eq(second.op, "benchmark", "the figure is measured again")
    expect.eq(f2.result.verdicts_source, "cached")
    expect.eq(f2.result.sanitizer.ok, true)
    expect.eq(f2.result.generalizes, "yes")
    expect.same(f2.phases.finalists[1].reused, { "sanitizer", "generalizes" })
    expect.eq(f2.result.compile_max_autotune_ms, 0.7)
    -- another kernel is confirmed in full
    local f3 = confirm.final(run2, { kernel(run2, "KOTHER") }, kernel(run2, "KIN"))
    expect.truthy(f3.confirmed)
    expect.eq(pool.jobs[#pool.jobs - 1].sanitize, true)
    db:close()
  end)
end)

describe("kagent.mem measurements", function()
  it("stores, replaces and merges a measurement by kind and key", function()
    local dir = spec.tmpdir("measurements")
    local a = assert(kagent.mem.open(dir .. "/a.db"))
    expect.eq(a:measurement_get("baselines", "k1"), nil)
    expect.truthy(a:measurement_put("baselines", "k1", { eager_ms = 1.0 }))
    expect.eq(a:measurement_get("baselines", "k1").eager_ms, 1.0)
    expect.eq(a:measurement_get("confirmation", "k1"), nil, "kinds are apart")
    a:measurement_put("baselines", "k1", { eager_ms = 2.0 })
    expect.eq(a:measurement_get("baselines", "k1").eager_ms, 2.0, "replaced")
    local b = assert(kagent.mem.open(dir .. "/b.db"))
    b:measurement_put("baselines", "k2", { eager_ms = 3.0 })
    local added = assert(a:merge(dir .. "/b.db"))
    expect.eq(added.measurements, 1)
    expect.eq(a:measurement_get("baselines", "k2").eager_ms, 3.0)
    expect.eq(a:merge(dir .. "/b.db").measurements, 0, "merging again adds nothing")
    expect.errors(function() a:measurement_put("baselines", "k", "text") end, "value must be a table")
    a:close(); b:close()
  end)
end)
