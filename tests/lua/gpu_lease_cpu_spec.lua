-- The per-device lease with real CPU-mode evaluator workers: three workers share the one CPU
-- device (workers_per_gpu = 3). Their timed stages (exclusive) never overlap anything of another
-- job on the device, while their untimed stages (shared: the build, the first call, the trials) run
-- side by side; a timing is not held off by a stream of untimed work; a job that waited records
-- it; a worker killed while it holds the lease, in either mode, does not stop the others.
-- Assertions are about order and overlap on the host's monotonic clock, which the worker's
-- stage_at and kagent.time.now() share, never about speed. Needs KAGENT_PYTHON with torch.
local gpu = require("kagent.gpu")
local task, ktime, proc = kagent.task, kagent.time, kagent.proc

local relu = spec.root .. "/tests/fixtures/eval/relu_problem.py"
package.path = spec.root .. "/tests/fixtures/eval/?.lua;" .. package.path
local spans = require("stage_spans")
local span, overlap, TIMED, untimed = spans.span, spans.overlap, spans.TIMED, spans.untimed

local function need_torch()
  local r = proc.run({ spec.python, "-c", "import torch" }, { timeout = 60 })
  if not (r and r.code == 0) then skip(spec.python .. " has no torch") end
end

-- A correct relu candidate that sleeps `load` seconds at import (its build stage, which holds the lease shared; default 1, so
-- the loads of jobs sent together overlap; "forever" hangs there) and 2 ms a call, so its timed
-- stage lasts (about min_time, with stop = "time"); after `hang_after` calls, it sleeps for good (in its timed stage).
local function candidate(tag, o)
  o = o or {}
  local load = o.load == "forever" and 3600 or (o.load or 1.0)
  return table.concat({
    "import time", "import torch", "import torch.nn as nn", "",
    string.format("time.sleep(%g)  # %s", load, tag), "CALLS = [0]", "",
    "class ModelNew(nn.Module):",
    "    def forward(self, x):",
    "        CALLS[0] += 1",
    "        time.sleep(0.002)",
    o.hang_after and ("        if CALLS[0] > " .. o.hang_after .. ":\n            time.sleep(3600)") or "",
    "        return torch.clamp(x, min=0.0)", "" }, "\n")
end

local function job(tag, extra, cand)
  local j = { problem = relu, candidate = candidate(tag, cand), properties = false,
    bench = { stop = "time", min_time = 0.5, baselines = {} } }
  for k, v in pairs(extra or {}) do j[k] = v end
  return j
end

local function run_all(pool, jobs)
  local fns = {}
  for i, j in ipairs(jobs) do fns[i] = function() return pool:benchmark(j) end end
  local out = {}
  for i, r in ipairs(task.all(fns)) do
    expect.truthy(r.ok, r[1])
    out[i] = r[1]
  end
  return out
end

local pool
local function shared_pool()
  need_torch()
  pool = pool or gpu.pool({ devices = "cpu", workers_per_gpu = 3, python = spec.python, timeout = 120 })
  local devs, err = pool:devices()
  expect.truthy(devs, err)
  return pool
end

-- the worker (of pool p) whose lease is in `mode`, once one is (nil after `within` seconds)
local function holding(p, mode, within)
  local deadline = ktime.now() + (within or 120)
  while ktime.now() < deadline do
    for _, w in ipairs(p.workers) do
      if p.leases.cpu:mode_of(w) == mode then return w end
    end
    task.sleep(0.02)
  end
end

-- No untimed or timed stage of one job overlaps another job's timed stage.
local function expect_timings_alone(results, label)
  for i, a in ipairs(results) do
    local timed = span(a, TIMED)
    for j, b in ipairs(results) do
      if i ~= j and timed then
        local others = untimed(b) or {}
        others[#others + 1] = span(b, TIMED)
        for _, s in ipairs(others) do
          expect.falsy(overlap(timed, s), string.format(
            "%s: stages of job %s [%.3f, %.3f] overlap job %s's timing [%.3f, %.3f]", label,
            j, s[1], s[2], i, timed[1], timed[2]))
        end
      end
    end
  end
end

describe("the GPU lease", function()
  it("keeps timed stages apart while builds overlap, and records the wait", function()
    local results = run_all(shared_pool(), { job("a"), job("b"), job("c") })
    local timed, loads = {}, {}
    for i, r in ipairs(results) do
      expect.eq(r.ok, true, r.error)
      timed[i] = span(r, TIMED)
      loads[i] = span(r, { "build" })
      expect.truthy(timed[i] and loads[i], "job " .. i .. " reports when its stages ran")
      expect.truthy(type(r.lease_wait_s) == "number" and r.lease_wait_s >= 0, "lease_wait_s")
    end
    expect_timings_alone(results, "three at once")
    local loads_overlap, waited = false, false
    for i = 1, #results do
      for j = 1, #results do
        if i ~= j then
          loads_overlap = loads_overlap or overlap(loads[i], loads[j])
          -- a job that reached its gate before another's timed stages ended, and was timed
          -- after them, must have waited for that job's lease
          local gate = results[j].stage_at.gate
          if gate and gate < timed[i][2] and timed[i][2] <= timed[j][1] then
            waited = true
            expect.truthy(results[j].lease_wait_s > 0, "job " .. j .. " records its wait")
          end
        end
      end
    end
    expect.truthy(loads_overlap, "the untimed build stages (shared) ran side by side")
    expect.truthy(waited, "some job reached its gate before another's timing ended")
  end, { timeout = 240 })

  it("keeps other jobs' untimed GPU work out of a timing, and lets it run side by side", function()
    local p = shared_pool()
    -- job a times for 2 s; b and c are sent once it holds the lease exclusive: without their
    -- shared holds, their loads (1 s each) would run during a's timing
    local a = task.spawn(function()
      return p:benchmark(job("a", { bench = { stop = "time", min_time = 2.0, baselines = {} } }, { load = 0.1 }))
    end)
    expect.truthy(holding(p, "exclusive"), "job a took the lease exclusive")
    local rs = run_all(p, { job("b"), job("c") })
    local ok, ra = task.wait(a)
    expect.truthy(ok, ra)
    local results = { ra, rs[1], rs[2] }
    for i, r in ipairs(results) do
      expect.eq(r.ok, true, r.error)
      expect.truthy(span(r, TIMED) and untimed(r), "job " .. i .. " reports when its stages ran")
      expect.truthy(type(r.lease_shared_wait_s) == "number", "lease_shared_wait_s")
      expect.truthy(spans.within_any(span(r, TIMED), spans.holds(r, "exclusive")),
        "job " .. i .. "'s timing ran inside its exclusive hold (lease_holds)")
    end
    for _, x in ipairs(spans.holds(ra, "exclusive")) do
      expect.falsy(spans.overlaps_any(x, spans.holds(rs[1])) or spans.overlaps_any(x, spans.holds(rs[2])),
        "b and c held nothing while a held the lease exclusive")
    end
    expect_timings_alone(results, "b and c during a's timing")
    local side_by_side = false
    for _, u in ipairs(untimed(rs[1])) do side_by_side = side_by_side or spans.overlaps_any(u, untimed(rs[2])) end
    expect.truthy(side_by_side, "the untimed stages of b and c ran side by side")
    expect.truthy(rs[1].lease_shared_wait_s > 0 and rs[2].lease_shared_wait_s > 0,
      "b and c record their wait for a's timing to end")
  end, { timeout = 240 })

  it("does not let a stream of untimed jobs hold off a timing", function()
    local p = shared_pool()
    -- two workers verify one job after another (shared holds only, following each other
    -- closely); the third worker's timing asks meanwhile and is served before the streams end
    local streams = {}
    for s = 1, 2 do
      streams[s] = task.spawn(function()
        local out = {}
        for k = 1, 4 do
          out[k] = p:verify(job("stream " .. s .. "." .. k, { trials = 2 }, { load = 0.6 }))
        end
        return out
      end)
    end
    task.sleep(0.3)
    local t = p:benchmark(job("timed", nil, { load = 0.1 }))
    expect.eq(t.ok, true, t.error)
    local timed = span(t, TIMED)
    local later = 0
    for s = 1, 2 do
      local ok, out = task.wait(streams[s])
      expect.truthy(ok, out)
      for _, r in ipairs(out) do
        expect.eq(r.ok, true, r.error)
        local u = untimed(r)
        expect.falsy(spans.overlaps_any(timed, u), "a stream job ran during the timing")
        if u[1][1] > timed[2] then later = later + 1 end
      end
    end
    expect.truthy(later > 0, "the timing was served before the streams ended")
  end, { timeout = 240 })

  for _, mode in ipairs({ "shared", "exclusive" }) do
    it("is given back when the worker holding it " .. mode .. " dies", function()
      local p = shared_pool()
      local respawns = p:stats().respawns
      -- hangs in its load stage (holding shared) or in its timed stage (holding exclusive)
      -- (5 trials and 3 warm-up calls under shared; the 9th call is the timed loop's first)
      local hang = mode == "shared" and { load = "forever" } or { load = 0.1, hang_after = 8 }
      local hung = task.spawn(function() return p:benchmark(job("hang " .. mode, nil, hang)) end)
      local holder = holding(p, mode)
      expect.truthy(holder, "the hanging job took the lease " .. mode)
      if mode == "shared" then  -- past its reference: its candidate hangs at its import
        task.sleep(1.0)
        expect.eq(p.leases.cpu:mode_of(holder), "shared")
      end
      local others = task.spawn(function() return run_all(p, { job("d"), job("e") }) end)
      task.sleep(0.5)
      holder.proc:kill("KILL")
      local ok, r = task.wait(hung)
      expect.truthy(ok, r)
      expect.eq(r.ok, false)
      expect.match(r.error, "^EWORKER")
      local ok2, rs = task.wait(others)
      expect.truthy(ok2, rs)
      for _, x in ipairs(rs) do
        expect.eq(x.ok, true, x.error)
        -- a lease never given back would hold them until the pool's 120 s timeout
        expect.lt(x.lease_wait_s + x.lease_shared_wait_s, 60, "the lease came back at the kill")
      end
      expect.eq(p:stats().respawns, respawns + 1)
    end, { timeout = 240 })
  end

  it("is not asked for by a device's only worker", function()
    need_torch()
    local solo = gpu.pool({ devices = "cpu", python = spec.python, timeout = 120 })
    local r = solo:benchmark(job("solo"))
    solo:close()
    expect.eq(r.ok, true, r.error)
    expect.eq(r.lease_wait_s, 0)
    expect.eq(r.lease_shared_wait_s, 0)
    expect.eq(next(solo.leases), nil, "no lease for a device of one worker")
  end, { timeout = 120 })

  after_all(function()
    if pool then pool:close() end
  end)
end)
