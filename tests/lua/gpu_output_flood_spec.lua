-- A candidate that floods its output (50 MiB in 1 MiB lines on stdout and stderr) costs the
-- runtime nothing it would notice: a task ticking every 20 ms keeps ticking while the job runs,
-- the job's verdict comes back, and the worker's log holds capped lines, not the flood. A real
-- CPU-mode worker (Debian python3 with torch; skipped without one).
local gpu = require("kagent.gpu")
local fs, proc, ktime, task = kagent.fs, kagent.proc, kagent.time, kagent.task

local fix = spec.root .. "/tests/fixtures"

describe("a candidate that floods its output streams", function()
  it("does not stall the event loop, and its lines reach the log capped", function()
    local r = proc.run({ spec.python, "-c", "import torch" }, { timeout = 60 })
    if not (r and r.code == 0) then skip(spec.python .. " has no torch") end
    local dir = spec.tmpdir("flood")
    -- on a GPU machine the worker is a GPU one (the candidate's first call floods either way)
    local on_gpu = #gpu.gpus() > 0
    local pool = gpu.pool({ devices = on_gpu and { 0 } or "cpu", python = spec.python, timeout = 120, log_dir = dir })
    assert(pool:devices())
    local stop, max_gap, ticks = false, 0, 0
    local ticker = task.spawn(function()
      local last = ktime.now()
      while not stop do
        task.sleep(0.02)
        local now = ktime.now()
        max_gap, last, ticks = math.max(max_gap, now - last), now, ticks + 1
      end
    end)
    local t0 = ktime.now()
    local res = pool:verify({ problem = fix .. "/eval/relu_problem.py",
      candidate = fix .. "/adversarial/cpu_output_flood.py" })
    -- the next job's drain meets what is left of a cut 1 MiB line (no newline in it)
    local after = pool:verify({ problem = fix .. "/eval/relu_problem.py", candidate = fix .. "/eval/relu_good.py" })
    local job_s = ktime.now() - t0
    stop = true
    task.wait(ticker)
    pool:close()
    expect.truthy(res.ok, "the flooding candidate is still judged: " .. tostring(res.error))
    expect.truthy(after.ok, "the next job runs: " .. tostring(after.error))
    -- before, one drain of a 4 MiB line without a newline took tens of seconds of the loop
    expect.truthy(max_gap < 1.0, string.format("the loop stalled %.2f s (job %.1f s, %d ticks)", max_gap, job_s, ticks))
    local log = fs.read(dir .. (on_gpu and "/worker-0-1.log" or "/worker-cpu-1.log")) or ""
    expect.truthy(#log < 8 * 1048576, "the log holds capped lines: " .. #log .. " bytes")
    expect.match(log, "bytes of this line dropped")
    for line in log:gmatch("[^\n]*") do
      expect.truthy(#line <= gpu.MAX_LOG_LINE + 100, "a log line of " .. #line .. " bytes")
    end
    print(string.format("     flood (%s): both jobs %.2f s, longest pause of a 20 ms ticker %.3f s, log %d bytes",
      on_gpu and "GPU worker" or "CPU worker", job_s, max_gap, #log))
  end, { timeout = 300 })
end)
