-- bench/throughput.lua: candidates evaluated per minute by the evaluator pool, one worker per GPU
-- against several (pipelined: the workers' untimed stages run side by side, holding the GPU's
-- lease shared, and each timing holds it exclusive), on one GPU and, where the machine has
-- several, on all.
--   kagent-rt bench/throughput.lua [--candidates 32] [--workers N] [--devices all|0,1|cpu] [--op evaluate|benchmark]
-- The batch: --candidates distinct knob variants of --kernel (agents/lib/tunables.lua, nearest
-- moves first; no LLM) and three copies of the unchanged kernel (the control) at its start, middle
-- and end, sent at once to a fresh pool with a cold Triton cache for each configuration, once
-- the pool is warm (one copy of the control per worker first: each worker's start, reference and
-- peaks, printed apart as "start s"). Prints a table (workers, start, jobs, verified, wall,
-- candidates per minute of the warm pool, the batch's seconds of waiting for the lease exclusive
-- and shared, a job's median seconds in its worker and its median CPU seconds), the ratios, and the
-- control's median with p10/p90 timed alone (before any batch, one worker) and inside each batch.
-- Each configuration's row goes to stderr as soon as it ran, and --json is written after each one,
-- so a run cut off keeps what it measured.
-- A failed variant is a figure (a search pays for it too); a failed control, or a pool that does
-- not start, fails the benchmark (exit 1): its figures cannot be trusted. The measuring itself is
-- bench/lib/throughput.lua's, shared with tests/gpu/lease_gpu_check.lua.
package.path = kagent.root .. "/?.lua;" .. package.path
local fs, json = kagent.fs, kagent.json
local gpu = require("kagent.gpu")
local run_lib = require("agents.run")
local options = require("agents.run.options")
local tp = require("bench.lib.throughput")

local PROG = "bench/throughput.lua"
-- the showcase problem on a GPU; the small CPU problem of the same kind of knob in CPU mode
local DEFAULTS = {
  gpu = { problem = "examples/problems/4_matmul_gemv.py", kernel = "examples/kernels/4_matmul_gemv.py" },
  cpu = { problem = "examples/problems/rmsnorm_small.py", kernel = "examples/kernels/cpu/rmsnorm_small_chunked.py" },
}

local spec = {
  candidates = { type = "integer", min = 1, default = 32, help = "knob variants of the kernel in each batch" },
  workers = { type = "integer", min = 2, help = "workers per GPU of the pipelined pool (default: the pool's automatic choice, gpu.auto_workers_per_gpu, at least 2; 3 in CPU mode)" },
  devices = options.devices,
  problem = { type = "string", metavar = "file.py", help = "KernelBench problem (default " .. DEFAULTS.gpu.problem .. "; " .. DEFAULTS.cpu.problem .. " in CPU mode)" },
  kernel = { type = "string", metavar = "file.py", help = "kernel whose knobs are varied; also the control (default " .. DEFAULTS.gpu.kernel .. "; " .. DEFAULTS.cpu.kernel .. " in CPU mode)" },
  op = { type = "string", choices = { "evaluate", "benchmark" }, default = "evaluate", help = "pool method per job: evaluate (verify, time, profile: what a search pays for a kernel it keeps, and for every candidate with profile_children) or benchmark (verify, time: what it pays for every other candidate)" },
  metrics = options.metrics,
  timeout = { type = "number", above = 0, default = 900, help = "seconds the pool waits for one job" },
  json = { type = "string", metavar = "file", help = "also write every configuration's figures and each job's whole result (its stage timeline, lease waits, errors) as JSON, after each configuration (complete = false until the last)" },
}
local opts, _, code = run_lib.parse(PROG, kagent.args, spec, {
  usage = "kagent-rt " .. PROG .. " [options]",
  about = "Candidates per minute through the evaluator pool: 1 worker per GPU against pipelined workers, "
    .. "1 GPU against all, with a control kernel's timing alone and inside each batch. bench/README.md describes it.",
})
if not opts then return code end

-- default: every GPU here, else CPU mode
local devices, derr, dcode = run_lib.pool_devices(PROG,
  { devices = opts.devices or (#gpu.gpus() > 0 and "all" or "cpu") })
if derr then return dcode end
local cpu = devices == "cpu"
local defaults = cpu and DEFAULTS.cpu or DEFAULTS.gpu
local problem = opts.problem or (kagent.root .. "/" .. defaults.problem)
local kernel_path = opts.kernel or (kagent.root .. "/" .. defaults.kernel)
local kernel = fs.read(kernel_path)
if not kernel then io.stderr:write(PROG .. ": cannot read the kernel " .. kernel_path .. "\n"); return 2 end
if not fs.read(problem) then io.stderr:write(PROG .. ": cannot read the problem " .. problem .. "\n"); return 2 end
local auto = not cpu and not opts.workers and gpu.auto_workers_per_gpu() or nil
local workers = opts.workers or (auto and math.max(2, auto.workers)) or 3

local ok_batch, jobs, distinct = pcall(tp.batch, kernel, opts.candidates)
if not ok_batch then io.stderr:write(PROG .. ": " .. kernel_path .. ": " .. tostring(jobs) .. "\n"); return 2 end

local function job_of(src)
  return { problem = problem, candidate = src, dtype = "fp32", bench = { baselines = json.empty_array },
    profile = { metric_set = opts.metrics } }
end

-- the configurations: 1 worker, then `workers`, on one device; the same on all where several
local configs = {}
local one = cpu and "cpu" or { devices[1] }
local one_label = cpu and "cpu" or ("GPU " .. devices[1])
configs[1] = { label = one_label, devices = one, workers = 1 }
configs[2] = { label = one_label, devices = one, workers = workers }
if not cpu and #devices > 1 then
  local all_label = string.format("all %d GPUs", #devices)
  configs[3] = { label = all_label, devices = devices, workers = 1 }
  configs[4] = { label = all_label, devices = devices, workers = workers }
end

print(string.format("throughput: %d candidates (%d distinct knob settings of %s) and %d controls per batch; %s; problem %s",
  opts.candidates, distinct, kernel_path, tp.CONTROLS, opts.op, problem))
if auto then print(string.format("pipelined: %d workers per GPU (automatic choice %d: %s)", workers, auto.workers, auto.rule)) end
if cpu then
  print("CPU MODE: these are CPU-mode workers sharing this machine's cores; the figures are NOT GPU figures.")
end

io.stdout:flush()

-- write_json(complete): every configuration measured so far, after each one, so a run cut off
-- (a device call's time limit, Ctrl-C) keeps what it measured; `complete` says whether all ran
local function write_json(complete)
  if not opts.json then return true end
  local dump = { problem = problem, kernel = kernel_path, op = opts.op, cpu = cpu, complete = complete, configs = {} }
  for i, c in ipairs(configs) do
    if not c.run then break end
    dump.configs[i] = { label = c.label, workers = c.workers, wall_s = c.run.wall,
      per_minute = tp.per_minute(c.run), alone = c.run.alone, results = c.run.results,
      tags = {}, controls = {} }
    for k, j in ipairs(jobs) do dump.configs[i].tags[k], dump.configs[i].controls[k] = j.tag, j.control == true end
  end
  local ok_w, werr = fs.write(opts.json, json.encode(dump))
  if not ok_w then io.stderr:write(PROG .. ": cannot write " .. opts.json .. ": " .. tostring(werr) .. "\n") end
  return ok_w
end

local failed_run = false
for i, c in ipairs(configs) do
  io.stderr:write(string.format("[%d/%d] %s, %d worker(s) per device: %d jobs%s...\n", i, #configs, c.label,
    c.workers, #jobs, i == 1 and (" after the control alone ×" .. tp.CONTROLS) or ""))
  local done, bad = 0, 0
  local run, err = tp.run({ devices = c.devices, workers_per_gpu = c.workers, op = opts.op, job = job_of,
    jobs = jobs, warm = kernel, alone = i == 1 and tp.alone(kernel) or nil, timeout = opts.timeout,
    on_done = function(_, r)
      done = done + 1
      if not r.ok then bad = bad + 1 end
      if done % math.max(1, math.floor(#jobs / 5)) == 0 or done == #jobs then
        io.stderr:write(string.format("  %d/%d done (%d failed)\n", done, #jobs, bad))
      end
    end })
  if not run then
    io.stderr:write(PROG .. ": " .. c.label .. ", " .. c.workers .. " worker(s): the pool did not start: " .. tostring(err) .. "\n")
    return 1
  end
  c.run = run
  -- its row as soon as it is measured: the table below comes only once every configuration ran
  io.stderr:write((i == 1 and ("  " .. tp.HEADER .. "\n") or "") .. "  " .. tp.row(c.label, c.workers, run) .. "\n")
  local mem = tp.memory_line(run)
  if mem then print(string.format("  %s ×%d: %s", c.label, c.workers, mem)) end
  if not write_json(i == #configs) then return 1 end
  for _, e in ipairs(run.warm_failed) do
    print(string.format("  %s ×%d: a warm-up job failed: %s", c.label, c.workers, e:match("[^\n]*"):sub(1, 160)))
  end
  for k, r in ipairs(run.alone) do
    if not r.ok then
      print(string.format("  %s: the control alone (run %d) failed: %s", c.label, k, tostring(r.error):match("[^\n]*")))
      failed_run = true
    end
  end
  for _, k in ipairs(run.failed) do
    local e = tostring(run.results[k].error or run.results[k].stage or "failed"):match("[^\n]*"):sub(1, 160)
    print(string.format("  %s ×%d: job %d (%s) failed: %s", c.label, c.workers, k, jobs[k].tag, e))
    if jobs[k].control then failed_run = true end
  end
end

print("")
print(tp.HEADER)
for _, c in ipairs(configs) do print(tp.row(c.label, c.workers, c.run)) end
print("")
print(string.format("pipelined / 1 worker, %s: %.2fx", one_label, tp.per_minute(configs[2].run) / tp.per_minute(configs[1].run)))
if configs[4] then
  print(string.format("%s / 1 GPU, %d workers per GPU: %.2fx", configs[4].label, workers,
    tp.per_minute(configs[4].run) / tp.per_minute(configs[2].run)))
  print(string.format("%s / 1 GPU, 1 worker per GPU: %.2fx", configs[3].label,
    tp.per_minute(configs[3].run) / tp.per_minute(configs[1].run)))
end
local alone = tp.timing(configs[1].run.alone)
print(tp.control_line("alone (1 worker, " .. one_label .. ")", alone))
for _, c in ipairs(configs) do
  local t = tp.timing(tp.controls(c.run))
  local vs = tp.versus(t, alone)
  print(tp.control_line(string.format("in the batch, %s ×%d", c.label, c.workers), t) .. (vs and ("; vs alone " .. vs) or ""))
end
if cpu then print("CPU MODE: not GPU figures.") end
if failed_run then
  io.stderr:write(PROG .. ": a control job failed: the figures cannot be trusted\n")
  return 1
end
return 0
