-- Driver of tests/gpu/lease_gpu_check.sh (GPU only): several workers sharing one GPU through the
-- timing lease. Twelve knob variants of examples/kernels/matmul_small.py and three copies of the
-- unchanged kernel (the control) go through a pool of 1 worker and then of `--workers` (default 3)
-- on GPU 0, each pool with a cold Triton cache of its own. Checks (PASS/FAIL lines, exit 1 on a
-- failure): every job verifies and is timed, and with several workers no two jobs' timed stages
-- overlap (stage_at, the host's monotonic clock). Prints, as figures and not as checks: jobs per
-- minute for each pool, and the control's median timed alone (before the batch, one worker)
-- against its median inside each batch, with their p10..p90.
--   kagent-rt tests/gpu/lease_gpu_check.lua [--workers 3] [--op benchmark|evaluate] [--cpu]
-- --cpu runs the same on CPU-mode workers with the CPU matmul (no knobs: the variants differ only
-- by a comment), to try the script where there is no GPU; its figures say nothing of a GPU.
local gpu = require("kagent.gpu")
local task, ktime, fs, proc = kagent.task, kagent.time, kagent.fs, kagent.proc

local opts = { workers = 3, op = "benchmark" }
local i = 1
while i <= #kagent.args do
  local a, v = kagent.args[i], kagent.args[i + 1]
  if a == "--workers" then opts.workers = tonumber(v) or error("--workers takes a number")
  elseif a == "--op" then opts.op = v
  elseif a == "--cpu" then opts.cpu, i = true, i - 1
  else error("unknown argument " .. a .. " (--workers N, --op benchmark|evaluate, --cpu)") end
  i = i + 2
end
assert(opts.op == "benchmark" or opts.op == "evaluate", "--op is benchmark or evaluate")

local PROBLEM = kagent.root .. "/examples/problems/matmul_small.py"
local KERNEL = fs.read(kagent.root .. "/examples/kernels/" .. (opts.cpu and "cpu/" or "") .. "matmul_small.py")
package.path = kagent.root .. "/tests/fixtures/eval/?.lua;" .. package.path
local spans = require("stage_spans")
local span, TIMED = spans.span, spans.TIMED
local CONTROLS = 3

local failures = 0
local function check(cond, what)
  print((cond and "PASS " or "FAIL ") .. what)
  if not cond then failures = failures + 1 end
end

-- the kernel with its knobs set (a distinct source per variant: no result is reused)
local function variant(knobs, tag)
  local src = KERNEL
  for name, value in pairs(knobs) do
    src = src:gsub("\n" .. name .. " = %d+", "\n" .. name .. " = " .. value)
  end
  return src .. "\n# " .. tag .. "\n"
end

local function batch()
  local jobs = {}
  for _, bm in ipairs({ 32, 64, 128 }) do
    for _, bn in ipairs({ 32, 64 }) do
      for _, nw in ipairs({ 4, 8 }) do
        jobs[#jobs + 1] = { tag = string.format("M%d N%d W%d", bm, bn, nw),
          candidate = variant({ BLOCK_M = bm, BLOCK_N = bn, NUM_WARPS = nw }, "variant") }
      end
    end
  end
  -- the control at the start, the middle and the end of the batch
  for k, at in ipairs({ 1, 8, #jobs + 3 }) do
    table.insert(jobs, at, { tag = "control", control = true, candidate = variant({}, "control " .. k) })
  end
  return jobs
end

local function job_of(j)
  return { problem = PROBLEM, candidate = j.candidate, bench = { baselines = { "eager" } } }
end

local function median(xs)
  table.sort(xs)
  local n = #xs
  if n == 0 then return nil end
  return n % 2 == 1 and xs[(n + 1) / 2] or (xs[n / 2] + xs[n / 2 + 1]) / 2
end

local function control_line(label, results)
  local med, p10, p90 = {}, {}, {}
  for _, r in ipairs(results) do
    if r.ok then
      med[#med + 1], p10[#p10 + 1], p90[#p90 + 1] = r.time_ms.median, r.time_ms.p10, r.time_ms.p90
    end
  end
  local m = median(med)
  print(string.format("control %-26s median %s ms (p10 %s, p90 %s; %d runs)", label,
    m and string.format("%.4f", m) or "-", median(p10) and string.format("%.4f", median(p10)) or "-",
    median(p90) and string.format("%.4f", median(p90)) or "-", #med))
  return m, median(p10), median(p90)
end

-- one pool of `workers` on GPU 0 with a cold cache: the control alone first (one worker only),
-- then the whole batch at once
local function run_pool(workers)
  local dir = proc.run({ "mktemp", "-d" }).stdout:gsub("%s+$", "")
  local pool = gpu.pool({ devices = opts.cpu and "cpu" or { 0 }, workers_per_gpu = workers, timeout = 900,
    env = { KAGENT_EVAL_SANDBOX_DIR = dir } })
  local devs, err = pool:devices()
  check(devs ~= nil, string.format("%d worker(s) started on %s %s", workers, opts.cpu and "the CPU" or "GPU 0", err or ""))
  if not devs then return nil end
  local alone = {}
  if workers == 1 then
    for k = 1, CONTROLS do alone[k] = pool[opts.op](pool, job_of({ candidate = variant({}, "alone " .. k) })) end
  end
  local jobs = batch()
  local fns = {}
  for k, j in ipairs(jobs) do fns[k] = function() return pool[opts.op](pool, job_of(j)) end end
  local t0 = ktime.now()
  local out = task.all(fns)
  local wall = ktime.now() - t0
  pool:close()
  proc.run({ "rm", "-rf", dir })
  local results, ok_all, waits = {}, true, 0
  for k, r in ipairs(out) do
    results[k] = r.ok and r[1] or { ok = false, error = tostring(r[1] or r[2]) }
    if not results[k].ok then
      ok_all = false
      print(string.format("  job %d (%s): %s", k, jobs[k].tag, tostring(results[k].error)))
    end
    waits = waits + (results[k].lease_wait_s or 0)
  end
  check(ok_all, string.format("%d workers: all %d jobs verified and timed", workers, #jobs))
  return { jobs = jobs, results = results, wall = wall, waits = waits, alone = alone }
end

local function no_overlap(run, workers)
  local timed = {}
  for k, r in ipairs(run.results) do
    if r.ok then timed[#timed + 1] = { k = k, s = span(r, TIMED) } end
  end
  local bad
  for a = 1, #timed do
    for b = a + 1, #timed do
      local x, y = timed[a].s, timed[b].s
      if x and y and spans.overlap(x, y) then bad = bad or { timed[a].k, timed[b].k } end
    end
  end
  check(bad == nil, string.format("%d workers: no two jobs' timed stages overlap%s", workers,
    bad and string.format(" (jobs %d and %d do)", bad[1], bad[2]) or ""))
end

local one = run_pool(1)
local many = run_pool(opts.workers)
if one and many then
  no_overlap(many, opts.workers)
  print("")
  print(string.format("%-10s %6s %9s %12s %14s", "workers", "jobs", "wall s", "jobs/min", "lease wait s"))
  for _, x in ipairs({ { 1, one }, { opts.workers, many } }) do
    local n = #x[2].jobs
    print(string.format("%-10d %6d %9.1f %12.2f %14.1f", x[1], n, x[2].wall, n / x[2].wall * 60, x[2].waits))
  end
  print(string.format("throughput ratio (%d workers / 1): %.2f", opts.workers,
    (#many.jobs / many.wall) / (#one.jobs / one.wall)))
  local function controls(run)
    local rs = {}
    for k, j in ipairs(run.jobs) do if j.control then rs[#rs + 1] = run.results[k] end end
    return rs
  end
  local m0, lo, hi = control_line("alone (1 worker)", one.alone)
  control_line("in the batch, 1 worker", controls(one))
  local m2 = control_line(string.format("in the batch, %d workers", opts.workers), controls(many))
  if m0 and m2 then
    print(string.format("control in the %d-worker batch vs alone: %.3fx; within alone's p10..p90: %s",
      opts.workers, m2 / m0, (m2 >= lo and m2 <= hi) and "yes" or "no"))
  end
end
print(failures == 0 and "lease_gpu_check: all checks passed" or
  string.format("lease_gpu_check: %d check(s) failed", failures))
return failures == 0 and 0 or 1
