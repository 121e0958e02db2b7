-- bench/pool_start.lua: how long a pool takes to start on one device with one worker and with
-- several: from the pool's start until each worker has finished one job of the control kernel
-- (its start, the problem's reference and the GPU's peaks, its first candidate), with a cold
-- sandbox folder (Triton's cache and the peaks' file) for each. The workers of a device share
-- one reference and one peaks measurement (src/gpu/eval/kagent_eval/worker/device_share.py), so the
-- several-worker pool should start within 1.2x of the one-worker pool.
--   kagent-rt bench/pool_start.lua [--workers 4] [--devices 0|cpu]
-- Prints one line per pool (start s, and how many of its workers ran the reference themselves),
-- then the ratio and RESULT PASS or FAIL (exit 1 on FAIL or when a pool does not start).
package.path = kagent.root .. "/?.lua;" .. package.path
local fs = kagent.fs
local json = kagent.json
local gpu = require("kagent.gpu")
local run_lib = require("agents.run")
local tp = require("bench.lib.throughput")

local PROG = "bench/pool_start.lua"
local TARGET = 1.2
local spec = {
  workers = { type = "integer", min = 2, default = 4, help = "workers of the larger pool" },
  devices = { type = "string", metavar = "0|cpu", help = "the device (default GPU 0, else cpu)" },
}
local opts, _, code = run_lib.parse(PROG, kagent.args, spec, { usage = "kagent-rt " .. PROG .. " [options]",
  about = "Start time of a pool of one worker against one of several workers on one device." })
if not opts then return code end
local cpu = opts.devices == "cpu" or (opts.devices == nil and #gpu.gpus() == 0)
local device = cpu and "cpu" or { tonumber(opts.devices or "0") }
local problem = kagent.root .. (cpu and "/examples/problems/rmsnorm_small.py" or "/examples/problems/4_matmul_gemv.py")
local kernel = fs.read(kagent.root .. (cpu and "/examples/kernels/cpu/rmsnorm_small_chunked.py"
  or "/examples/kernels/4_matmul_gemv.py"))

local function job_of(src)
  return { problem = problem, candidate = src, dtype = "fp32", bench = { baselines = json.empty_array } }
end

local rows = {}
for _, n in ipairs({ 1, opts.workers }) do
  local run, err = tp.run({ devices = device, workers_per_gpu = n, op = "benchmark", job = job_of, jobs = {},
    warm = kernel, timeout = 900 })
  if not run then
    io.stderr:write(PROG .. ": the pool of " .. n .. " did not start: " .. tostring(err) .. "\n")
    return 1
  end
  local refs = 0
  for _, r in ipairs(run.warm_results) do
    if (r.reference_s or 0) > 0 then refs = refs + 1 end
  end
  rows[#rows + 1] = { workers = n, start = run.start, refs = refs, failed = #run.warm_failed }
  print(string.format("pool of %d: start %.1f s, %d of %d workers ran the reference, %d failed",
    n, run.start, refs, n, #run.warm_failed))
  io.stdout:flush()
end
local ratio = rows[2].start / rows[1].start
local ok = ratio <= TARGET and rows[2].refs == 1 and rows[1].failed + rows[2].failed == 0
print(string.format("RESULT %s: %d workers start in %.2fx the time of one (target <= %.1fx); references run: %d",
  ok and "PASS" or "FAIL", opts.workers, ratio, TARGET, rows[2].refs))
return ok and 0 or 1
