-- The per-device timing lease with real CPU-mode evaluator workers: three workers share the one
-- CPU device (workers_per_gpu = 3). Their timed stages never overlap while their untimed stages
-- (load) do; a job that waited records it; a worker killed while it holds the lease does not stop
-- the others. Assertions are about order and overlap on the host's monotonic clock, which the
-- worker's stage_at and kagent.time.now() share, never about speed. Needs KAGENT_PYTHON with torch.
local gpu = require("kagent.gpu")
local task, ktime, proc = kagent.task, kagent.time, kagent.proc

local relu = spec.root .. "/tests/fixtures/eval/relu_problem.py"
package.path = spec.root .. "/tests/fixtures/eval/?.lua;" .. package.path
local spans = require("stage_spans")
local span, overlap, TIMED = spans.span, spans.overlap, spans.TIMED

local function need_torch()
  local r = proc.run({ spec.python, "-c", "import torch" }, { timeout = 60 })
  if not (r and r.code == 0) then skip(spec.python .. " has no torch") end
end

-- A correct relu candidate that sleeps at import (its load stage), so the loads of jobs sent
-- together overlap, and 2 ms a call, so its timed stage lasts (about min_time); after
-- `hang_after` calls, it sleeps for good (in its timed stage).
local function candidate(tag, hang_after)
  return table.concat({
    "import time", "import torch", "import torch.nn as nn", "",
    "time.sleep(1.0)  # " .. tag, "CALLS = [0]", "",
    "class ModelNew(nn.Module):",
    "    def forward(self, x):",
    "        CALLS[0] += 1",
    "        time.sleep(0.002)",
    hang_after and ("        if CALLS[0] > " .. hang_after .. ":\n            time.sleep(3600)") or "",
    "        return torch.clamp(x, min=0.0)", "" }, "\n")
end

local function job(tag, extra)
  local j = { problem = relu, candidate = candidate(tag), properties = false,
    bench = { min_time = 0.5, baselines = {} } }
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

describe("the timing lease", function()
  it("keeps timed stages apart while loads overlap, and records the wait", function()
    local results = run_all(shared_pool(), { job("a"), job("b"), job("c") })
    local timed, loads = {}, {}
    for i, r in ipairs(results) do
      expect.eq(r.ok, true, r.error)
      timed[i] = span(r, TIMED)
      loads[i] = span(r, { "load" })
      expect.truthy(timed[i] and loads[i], "job " .. i .. " reports when its stages ran")
      expect.truthy(type(r.lease_wait_s) == "number" and r.lease_wait_s >= 0, "lease_wait_s")
    end
    local loads_overlap, waited = false, false
    for i = 1, #results do
      for j = 1, #results do
        if i ~= j then
          expect.falsy(overlap(timed[i], timed[j]), string.format(
            "timed stages of jobs %d and %d overlap: [%.3f, %.3f] and [%.3f, %.3f]", i, j,
            timed[i][1], timed[i][2], timed[j][1], timed[j][2]))
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
    expect.truthy(loads_overlap, "the untimed load stages ran side by side")
    expect.truthy(waited, "some job reached its gate before another's timing ended")
  end, { timeout = 240 })

  it("is given back when the worker holding it dies", function()
    local p = shared_pool()
    local hung = task.spawn(function() return p:benchmark(job("hang", { candidate = candidate("hang", 6) })) end)
    -- wait until the hanging job's worker holds the lease (it then sleeps in its timed stage)
    local holder
    local deadline = ktime.now() + 120
    while not holder and ktime.now() < deadline do
      for _, w in ipairs(p.workers) do if w.holds_lease then holder = w end end
      if not holder then task.sleep(0.05) end
    end
    expect.truthy(holder, "the hanging job took the lease")
    local others = task.spawn(function() return run_all(p, { job("d"), job("e") }) end)
    task.sleep(0.5)
    holder.proc:kill("KILL")
    local ok, r = task.wait(hung)
    expect.truthy(ok, r)
    expect.eq(r.ok, false)
    expect.match(r.error, "^EWORKER")
    local ok2, rs = task.wait(others)
    expect.truthy(ok2, rs)
    for _, x in ipairs(rs) do expect.eq(x.ok, true, x.error) end
    expect.eq(p:stats().respawns, 1)
  end, { timeout = 240 })

  it("is not asked for by a device's only worker", function()
    need_torch()
    local solo = gpu.pool({ devices = "cpu", python = spec.python, timeout = 120 })
    local r = solo:benchmark(job("solo"))
    solo:close()
    expect.eq(r.ok, true, r.error)
    expect.eq(r.lease_wait_s, 0)
    expect.eq(next(solo.leases), nil, "no lease for a device of one worker")
  end, { timeout = 120 })

  it("closes", function()
    if pool then pool:close() end
  end)
end)
