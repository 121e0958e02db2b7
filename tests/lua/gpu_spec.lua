-- kagent.gpu against real CPU-mode evaluator workers (Debian python3 with torch; no fakes).
-- Set KAGENT_PYTHON to an interpreter with torch; without torch every case is skipped.
local gpu = require("kagent.gpu")
local proc = kagent.proc

local fix = spec.root .. "/tests/fixtures"
local relu = fix .. "/eval/relu_problem.py"
local good = fix .. "/eval/relu_good.py"

local has_torch
local function need_torch()
  if has_torch == nil then
    local r = proc.run({ spec.python, "-c", "import torch" }, { timeout = 60 })
    has_torch = r ~= nil and r.code == 0
  end
  if not has_torch then skip(spec.python .. " has no torch") end
end

local pool
local function cpu_pool()
  need_torch()
  pool = pool or gpu.pool({ devices = "cpu", python = spec.python, timeout = 60 })
  return pool
end

describe("kagent.gpu", function()
  it("rejects misuse", function()
    expect.errors(function() gpu.pool({ devices = 3 }) end, "devices")
    expect.errors(function() gpu.pool({ workers_per_gpu = 0 }) end, "workers_per_gpu")
    local p = gpu.pool({ devices = "cpu" })
    expect.errors(function() p:verify({ candidate = "x" }) end, "job.problem")
    p:close()
  end)

  it("starts a CPU-mode worker and lists it", function()
    local devs, err = cpu_pool():devices()
    expect.truthy(devs, err)
    expect.eq(#devs, 1)
    expect.eq(devs[1].mode, "cpu")
    expect.eq(devs[1].device, "cpu")
    expect.truthy(devs[1].torch, "torch version")
    expect.truthy(devs[1].sandbox and devs[1].sandbox.root, "how candidates are confined")
    -- the evaluator states the job defaults and its baselines once; the agents read them from
    -- here, and their one fallback list (agents/lib/baselines.lua) is the reported one
    expect.eq(devs[1].job_defaults.profile.metric_set, "full")
    expect.eq(#devs[1].job_defaults.bench.baselines, 0, "a candidate is timed alone by default")
    expect.eq(table.concat(devs[1].baselines, ","), "eager,compile,compile_max_autotune")
    expect.eq(table.concat(devs[1].reported_baselines, ","), table.concat(require("agents.lib.baselines").FALLBACK, ","))
    -- and the tolerance names, the default among them, which --tolerance is checked against
    expect.eq(table.concat(devs[1].tolerances, ","), "strict,kernelbench-v0.1")
    expect.eq(require("agents.run").unknown_tolerance(devs[1].job_defaults.tolerance, devs[1]), nil)
    expect.match(require("agents.run").unknown_tolerance("loose", devs[1]), "must be one of strict, kernelbench%-v0%.1")
  end, { timeout = 120 })

  it("verifies a correct candidate", function()
    local r = cpu_pool():verify({ problem = relu, candidate = good })
    expect.eq(r.ok, true, r.error)
    expect.eq(r.stage, "done")
    expect.eq(r.trials, 5)
    expect.eq(r.checks.inputs_unchanged, true)
    expect.eq(r.error, nil, "nulls are stripped")
    expect.truthy(r.fingerprint)
  end, { timeout = 120 })

  it("takes candidate source text", function()
    local src = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x * 0\n"
    local r = cpu_pool():verify({ problem = relu, candidate = src })
    expect.eq(r.ok, false)
    expect.eq(r.stage, "correctness")
    expect.match(r.error, "^EMISMATCH")
    expect.truthy(r.mismatch and r.mismatch.index, "mismatch location")
  end, { timeout = 120 })

  it("benchmarks and reports times", function()
    local r = cpu_pool():benchmark({ problem = fix .. "/eval/matmul_problem.py",
      candidate = fix .. "/eval/matmul_good.py", bench = { min_time = 0.1, baselines = { "eager" } } })
    expect.eq(r.ok, true, r.error)
    expect.truthy(r.time_ms.median > 0, "median")
    expect.truthy(r.time_ms.p10 <= r.time_ms.p90, "p10 <= p90")
    expect.truthy(r.eager_ms > 0, "eager")
    expect.truthy(r.speedup_vs_eager > 0, "speedup")
  end, { timeout = 120 })

  it("returns a result for a segfault and runs the next job", function()
    local p = cpu_pool()
    local r = p:verify({ problem = relu, candidate = fix .. "/adversarial/cpu_segfault.py" })
    expect.eq(r.ok, false)
    expect.match(r.error, "^ECRASH")
    expect.eq(p:verify({ problem = relu, candidate = good }).ok, true)
  end, { timeout = 120 })

  it("runs jobs from many tasks, one at a time per worker", function()
    local p = cpu_pool()
    local fns = {}
    for i = 1, 3 do fns[i] = function() return p:verify({ problem = relu, candidate = good }) end end
    local rs = kagent.task.all(fns)
    for i = 1, 3 do
      expect.eq(rs[i].ok, true)
      expect.eq(rs[i][1].ok, true)
    end
    expect.eq(p:stats().busy, 0)
  end, { timeout = 180 })

  it("wakes queued jobs as workers free up, in the order they came", function()
    local p = cpu_pool()
    local order, fns = {}, {}
    for i = 1, 3 do
      fns[i] = function()
        local r = p:verify({ problem = relu, candidate = good })
        order[#order + 1] = i
        return r
      end
    end
    kagent.task.all(fns)
    expect.eq(table.concat(order, ","), "1,2,3")
    expect.eq(#(p.free_waiters or {}), 0, "nobody left waiting")
  end, { timeout = 180 })

  it("gives a refused request its real stage", function()
    local r = cpu_pool():verify({ problem = relu, candidate = good, dtype = "fp7" })
    expect.eq(r.ok, false)
    expect.eq(r.stage, "request")
    expect.match(r.error, "^EBADREQ")
  end, { timeout = 120 })

  it("kills and respawns a worker that stops answering", function()
    need_torch()
    local p = gpu.pool({ devices = "cpu", python = spec.python, timeout = 3 })
    -- the worker's own stage timeout (30 s) is longer than the pool's wall timeout (3 s)
    local r = p:verify({ problem = relu, candidate = fix .. "/adversarial/cpu_infinite_loop.py",
      timeout = 30 })
    expect.eq(r.ok, false)
    expect.eq(r.stage, "worker")
    expect.match(r.error, "^EWORKER")
    expect.eq(p:stats().respawns, 1)
    local r2 = p:verify({ problem = relu, candidate = good, wall_timeout = 60 })
    expect.eq(r2.ok, true, r2.error)
    p:close()
  end, { timeout = 180 })

  it("fails cleanly when the interpreter does not exist", function()
    local p = gpu.pool({ devices = "cpu", python = "/nonexistent/python3" })
    local devs, err = p:devices()
    expect.eq(devs, nil)
    expect.match(err, "EWORKER")
    local r = p:verify({ problem = relu, candidate = good })
    expect.eq(r.ok, false)
    expect.match(r.error, "EWORKER")
  end)

  after_all(function()
    if pool then pool:close() end
  end)
end)
