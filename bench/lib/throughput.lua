-- What a pool of evaluator workers gets through, measured the same way by bench/throughput.lua and
-- tests/gpu/lease_gpu_check.lua: a batch of knob variants of one kernel (agents/lib/tunables.lua)
-- with copies of the unchanged kernel (the control) at its start, middle and end, sent all at once
-- to a fresh pool with a cold Triton cache of its own, once every worker has run a warm-up job
-- (a search keeps its pool for hours: the start-up is reported apart, not spread over the batch);
-- jobs per minute, and the control's median timed alone (before the batch, one worker) against
-- its median inside the batch.
-- Needs kagent.root/?.lua on package.path (for agents.lib.*).
local gpu = require("kagent.gpu")
local task, ktime, proc = kagent.task, kagent.time, kagent.proc
local tunables = require("agents.lib.tunables")
local median = require("agents.tools.sweep.figures").median

local M = {}

M.CONTROLS = 3

-- tagged(src, tag) -> src with a comment line: a distinct source, so no result or cache entry
-- of another job is reused, and the same program
local function tagged(src, tag) return src .. "\n# " .. tag .. "\n" end

-- batch(kernel, n) -> jobs {tag, candidate, control}: n distinct variants of the kernel's source
-- (nearest knob moves first; where the kernel has fewer than n settings, the rest repeat them
-- with a comment that tells them apart) and M.CONTROLS controls at the start, middle and end;
-- also the number of distinct knob settings among the variants.
function M.batch(kernel, n)
  local vs = tunables.variants(kernel, n)
  local distinct = #vs
  local jobs = {}
  for k = 1, n do
    local v = vs[(k - 1) % math.max(distinct, 1) + 1]
    if not v then error("the kernel has no integer knobs to vary (agents/lib/tunables.lua)", 2) end
    jobs[k] = { tag = v.knobs, candidate = tagged(v.code, "variant " .. k) }
  end
  local at = { 1, math.floor(#jobs / 2) + 2, #jobs + M.CONTROLS }
  for k = 1, M.CONTROLS do
    table.insert(jobs, at[k], { tag = "control", control = true, candidate = tagged(kernel, "control " .. k) })
  end
  return jobs, distinct
end

-- warm-up sources: one copy of the control per worker, sent at once before the batch
local function warm_ups(kernel, n)
  local out = {}
  for k = 1, n do out[k] = tagged(kernel, "warm-up " .. k) end
  return out
end

-- the control's copies timed alone, before a batch
function M.alone(kernel)
  local out = {}
  for k = 1, M.CONTROLS do out[k] = tagged(kernel, "alone " .. k) end
  return out
end

-- run(o) -> {jobs, results, wall, start, waits, shared_waits, alone, failed, warm_failed,
-- warm_results} or nil,
-- error (waits: the batch's seconds of waiting for the lease exclusive, lease_wait_s;
-- shared_waits: shared, lease_shared_wait_s; warm_failed: the warm-ups' errors). A fresh pool
-- of o.workers_per_gpu on o.devices ("cpu" or GPU numbers) with a cold Triton cache. Every
-- configuration is measured warm: first one copy of o.warm (the control's source) per worker,
-- all at once, so each worker has started, run its reference and measured its GPU's peaks
-- (`start`: the seconds from the pool's start to there, reported apart); then o.alone, sources
-- run one after another; then o.jobs, the batch, timed (`wall`).
-- o.job(source) -> the pool job; o.op: the pool method (evaluate, benchmark, ...); o.timeout,
-- o.python: the pool's; o.on_done(k, result), optional: called as each batch job ends.
function M.run(o)
  local t_start = ktime.now()
  local dir = proc.run({ "mktemp", "-d" }).stdout:gsub("%s+$", "")
  local pool = gpu.pool({ devices = o.devices, workers_per_gpu = o.workers_per_gpu, timeout = o.timeout or 900,
    python = o.python, env = { KAGENT_EVAL_SANDBOX_DIR = dir } })
  local devs, err = pool:devices()
  if not devs then
    pool:close(30)
    proc.run({ "rm", "-rf", dir })
    return nil, err
  end
  local warm = {}
  for k, src in ipairs(warm_ups(o.warm, o.workers_per_gpu * (o.devices == "cpu" and 1 or #devs))) do
    warm[k] = function() return pool[o.op](pool, o.job(src)) end
  end
  local warm_failed, warm_results = {}, {}
  for k, r in ipairs(task.all(warm)) do
    local res = r.ok and r[1] or { error = tostring(r[1] or r[2]) }
    warm_results[k] = res
    if not res.ok then warm_failed[#warm_failed + 1] = tostring(res.error) end
  end
  local start = ktime.now() - t_start
  local alone = {}
  for k, src in ipairs(o.alone or {}) do alone[k] = pool[o.op](pool, o.job(src)) end
  local fns = {}
  for k, j in ipairs(o.jobs) do
    fns[k] = function()
      local r = pool[o.op](pool, o.job(j.candidate))
      if o.on_done then o.on_done(k, r) end
      return r
    end
  end
  local t0 = ktime.now()
  local out = task.all(fns)
  local wall = ktime.now() - t0
  pool:close(30)  -- the workers gone before their folder is removed
  proc.run({ "rm", "-rf", dir })
  local results, waits, shared_waits, failed = {}, 0, 0, {}
  local job_s, cpu_s = {}, {}
  for k, r in ipairs(out) do
    results[k] = r.ok and r[1] or { ok = false, error = tostring(r[1] or r[2]) }
    if not results[k].ok then failed[#failed + 1] = k end
    waits = waits + (results[k].lease_wait_s or 0)
    shared_waits = shared_waits + (results[k].lease_shared_wait_s or 0)
    if results[k].elapsed then job_s[#job_s + 1] = results[k].elapsed end
    local cpu = results[k].cpu_s
    if type(cpu) == "table" and cpu.candidate then cpu_s[#cpu_s + 1] = cpu.candidate + (cpu.worker or 0) end
  end
  return { jobs = o.jobs, results = results, wall = wall, start = start, waits = waits,
    shared_waits = shared_waits, alone = alone, failed = failed, warm_failed = warm_failed,
    warm_results = warm_results, devices = devs, job_s = median(job_s), cpu_s = median(cpu_s) }
end

-- controls(run) -> the results of the batch's control jobs
function M.controls(run)
  local rs = {}
  for k, j in ipairs(run.jobs) do if j.control then rs[#rs + 1] = run.results[k] end end
  return rs
end

-- timing(results) -> {median, p10, p90, n}: the medians over the verified results of their
-- median, p10 and p90 (nil figures when none was timed)
function M.timing(results)
  local med, p10, p90 = {}, {}, {}
  for _, r in ipairs(results) do
    if r.ok and type(r.time_ms) == "table" and r.time_ms.median then
      med[#med + 1], p10[#p10 + 1], p90[#p90 + 1] = r.time_ms.median, r.time_ms.p10, r.time_ms.p90
    end
  end
  return { median = median(med), p10 = median(p10), p90 = median(p90), n = #med }
end

local function ms(v) return v and string.format("%.4f", v) or "-" end

-- control_line(label, t) -> "control <label> median X ms (p10 Y, p90 Z; n runs)"
function M.control_line(label, t)
  return string.format("control %-30s median %s ms (p10 %s, p90 %s; %d runs)", label, ms(t.median),
    ms(t.p10), ms(t.p90), t.n)
end

-- versus(t, ref) -> "1.012x; within alone's p10..p90: yes", or nil when either has no median
function M.versus(t, ref)
  if not (t.median and ref.median) then return nil end
  local inside = ref.p10 and ref.p90 and t.median >= ref.p10 and t.median <= ref.p90
  return string.format("%.3fx; within alone's p10..p90: %s", t.median / ref.median, inside and "yes" or "no")
end

local function gib(v) return string.format("%.1f GiB", v / 2 ^ 30) end

-- memory_line(run) -> how the pool admitted the problem's jobs by GPU memory (kagent.gpu.admission:
-- footprint, usable memory, jobs at once, the largest peak of a candidate's process, reruns alone),
-- or nil where no job reported it (CPU mode)
function M.memory_line(run)
  local a, ref_peak, cand_peak, reruns = nil, nil, 0, 0
  for _, r in ipairs(run.results) do
    if type(r.admission) == "table" and r.admission.footprint_bytes then a = r.admission end
    if type(r.memory) == "table" then
      ref_peak = r.memory.reference_peak_bytes or ref_peak
      cand_peak = math.max(cand_peak, r.memory.candidate_peak_bytes or 0)
    end
    if r.rerun_alone then reruns = reruns + 1 end
  end
  if not (a and a.usable_bytes) then return nil end
  local of = ref_peak and string.format("%.0f x the reference's peak %s", a.footprint_bytes / ref_peak, gib(ref_peak))
  return string.format("memory: footprint %s (%s), %s usable of %s: at most %d job(s) at once per GPU; "
    .. "largest candidate process peak %s; %d job(s) run again alone after running out beside others",
    gib(a.footprint_bytes), of or "?", gib(a.usable_bytes), gib(a.total_bytes), a.jobs_at_once or 0,
    gib(cand_peak), reruns)
end

-- per_minute(run) -> jobs per minute of the batch
function M.per_minute(run) return #run.jobs / run.wall * 60 end

M.HEADER = string.format("%-18s %8s %8s %5s %5s %8s %10s %13s %13s %7s %7s", "pool", "workers", "start s",
  "jobs", "ok", "wall s", "cand/min", "excl. wait s", "shared wait s", "job s", "cpu s")

local function secs(v) return v and string.format("%7.3f", v) or string.format("%7s", "-") end

-- row(label, workers, run) -> one line of the table under M.HEADER (start s: the warm-up, apart
-- from the batch's wall and candidates per minute; job s: a job's median time in its worker;
-- cpu s: a job's median CPU time, its candidate's process and its worker's together)
function M.row(label, workers, run)
  return string.format("%-18s %8d %8.1f %5d %5d %8.1f %10.2f %13.1f %13.1f %s %s", label, workers, run.start,
    #run.jobs, #run.jobs - #run.failed, run.wall, M.per_minute(run), run.waits, run.shared_waits,
    secs(run.job_s), secs(run.cpu_s))
end

return M
