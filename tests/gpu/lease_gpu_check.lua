-- Driver of tests/gpu/lease_gpu_check.sh (GPU only): several workers sharing one GPU through the
-- lease (shared around untimed GPU work, exclusive around timings). Twelve knob variants of examples/kernels/matmul_small.py (the nearest knob moves,
-- agents/lib/tunables.lua) and three copies of the unchanged kernel (the control) go through a pool of 1 worker and then of `--workers` (default 3)
-- on GPU 0, each pool with a cold Triton cache of its own. Checks (PASS/FAIL lines, exit 1 on a
-- failure): every job verifies and is timed, and with several workers no job's timed stages
-- overlap another job's (stage_at, the host's monotonic clock), each lies inside its job's
-- exclusive hold of the lease, and no exclusive hold overlaps another job's hold of either mode
-- (lease_holds, the pool's record). Prints how many jobs compiled with no lease held. Prints, as figures and not as checks: jobs per minute for each
-- pool, the seconds jobs waited for the lease exclusive and shared, and the control's median
-- timed alone (before the batch, one worker) against its median inside each batch, with their
-- p10..p90.
--   kagent-rt tests/gpu/lease_gpu_check.lua [--workers 3] [--op benchmark|evaluate] [--cpu]
-- --cpu runs the same on CPU-mode workers with the CPU matmul (its one knob, BLOCK_K), to try the
-- script where there is no GPU; its figures say nothing of a GPU. The batch and its figures come
-- from bench/lib/throughput.lua, which bench/throughput.lua uses too.
package.path = kagent.root .. "/?.lua;" .. kagent.root .. "/tests/fixtures/eval/?.lua;" .. package.path
local fs = kagent.fs
local tp = require("bench.lib.throughput")
local spans = require("stage_spans")
local span, TIMED = spans.span, spans.TIMED

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
local VARIANTS = 12

local failures = 0
local function check(cond, what)
  print((cond and "PASS " or "FAIL ") .. what)
  if not cond then failures = failures + 1 end
end

local function job_of(src)
  return { problem = PROBLEM, candidate = src, bench = { baselines = { "eager" } } }
end

-- one pool of `workers` on GPU 0 with a cold cache: the control alone first (one worker only),
-- then the whole batch at once
local function run_pool(workers)
  local jobs = tp.batch(KERNEL, VARIANTS)
  local run, err = tp.run({ devices = opts.cpu and "cpu" or { 0 }, workers_per_gpu = workers, op = opts.op,
    job = job_of, warm = KERNEL, jobs = jobs, alone = workers == 1 and tp.alone(KERNEL) or nil })
  check(run ~= nil, string.format("%d worker(s) started on %s %s", workers, opts.cpu and "the CPU" or "GPU 0", err or ""))
  if not run then return nil end
  for _, e in ipairs(run.warm_failed) do print("  a warm-up job failed: " .. e:match("[^\n]*")) end
  for _, k in ipairs(run.failed) do
    print(string.format("  job %d (%s): %s", k, jobs[k].tag, tostring(run.results[k].error)))
  end
  check(#run.failed == 0, string.format("%d workers: all %d jobs verified and timed", workers, #jobs))
  return run
end

-- no job's timed stages overlap another job's stages `of(result)` gives (a list of spans, or nil)
local function no_overlap(run, workers, of, label)
  local bad
  for a, ra in ipairs(run.results) do
    local x = ra.ok and span(ra, TIMED)
    for b, rb in ipairs(run.results) do
      local y = a ~= b and rb.ok and of(rb)
      if x and y and spans.overlaps_any(x, y) then bad = bad or { a, b } end
    end
  end
  check(bad == nil, string.format("%d workers: no job's timing overlaps another's %s%s", workers, label,
    bad and string.format(" (job %d's timing and job %d's do)", bad[1], bad[2]) or ""))
end

local one = run_pool(1)
local many = run_pool(opts.workers)
if one and many then
  no_overlap(many, opts.workers, function(r) return { span(r, TIMED) } end, "timing")
  -- the pool's record of the lease: every timing inside its own job's exclusive hold, and no
  -- exclusive hold beside another job's hold of either mode (a Triton compile holds none)
  local outside
  for k, r in ipairs(many.results) do
    local x = r.ok and span(r, TIMED)
    if x and not spans.within_any(x, spans.holds(r, "exclusive")) then outside = outside or k end
  end
  check(outside == nil, string.format("%d workers: every timing ran inside its job's exclusive hold%s", opts.workers,
    outside and string.format(" (job %d's did not)", outside) or ""))
  local bad
  for a, ra in ipairs(many.results) do
    for _, x in ipairs(spans.holds(ra, "exclusive")) do
      for b, rb in ipairs(many.results) do
        if a ~= b and spans.overlaps_any(x, spans.holds(rb)) then bad = bad or { a, b } end
      end
    end
  end
  check(bad == nil, string.format("%d workers: no exclusive hold overlaps another job's hold%s", opts.workers,
    bad and string.format(" (job %d's and job %d's do)", bad[1], bad[2]) or ""))
  local compiles, off = 0, 0
  for _, r in ipairs(many.results) do
    if r.stage_s and r.stage_s.compile_host then compiles, off = compiles + 1, off + r.stage_s.compile_host end
  end
  print(string.format("%d workers: %d of %d jobs compiled with no lease held (compile_host), %.1f s in all",
    opts.workers, compiles, #many.results, off))
  print("")
  print(tp.HEADER)
  print(tp.row(opts.cpu and "cpu" or "GPU 0", 1, one))
  print(tp.row(opts.cpu and "cpu" or "GPU 0", opts.workers, many))
  print(string.format("throughput ratio (%d workers / 1): %.2f", opts.workers, tp.per_minute(many) / tp.per_minute(one)))
  local alone = tp.timing(one.alone)
  print(tp.control_line("alone (1 worker)", alone))
  print(tp.control_line("in the batch, 1 worker", tp.timing(tp.controls(one))))
  local in_many = tp.timing(tp.controls(many))
  print(tp.control_line(string.format("in the batch, %d workers", opts.workers), in_many))
  local vs = tp.versus(in_many, alone)
  if vs then print(string.format("control in the %d-worker batch vs alone: %s", opts.workers, vs)) end
end
print(failures == 0 and "lease_gpu_check: all checks passed" or
  string.format("lease_gpu_check: %d check(s) failed", failures))
return failures == 0 and 0 or 1
