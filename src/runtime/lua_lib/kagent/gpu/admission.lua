-- kagent.gpu, GPU memory admission: which jobs may run on a GPU at once. Several workers of one
-- GPU each hold a job's inputs, outputs, timed input sets and probe copies; four of the showcase
-- #4 (8 GiB inputs) are more than an 80 GB H100 holds, and the job that ran out was refused for
-- the machine's doing (docs/results/2026-11-24-throughput.md). So the pool learns each problem's
-- GPU memory from its first job (the reference's peak, result.memory), and admits a job onto a
-- GPU only where its reservation fits beside those of the jobs already there. Until a problem's
-- peak is known, its job runs alone on its GPU. The pool (kagent/gpu/pool.lua) asks and waits;
-- this module only counts. Rules and figures: docs/lua-api.md (gpu.pool, "GPU memory").
local M = {}

-- A job's expected GPU memory (its footprint) is FOOTPRINT_FACTOR times its problem's reference
-- peak: the candidate's process holds the trial's inputs and outputs as the reference did, and
-- beside them one timed input set at least and the fresh-input probe's two copies
-- (kagent_eval/common/timed_inputs.py, child/fresh_probe.py), with the candidate's own buffers on top.
-- USABLE_SHARE of a GPU's total memory is what jobs may reserve: the rest is the CUDA contexts
-- of the workers' processes and their spares, and the allocator's fragmentation.
M.FOOTPRINT_FACTOR = 4
M.USABLE_SHARE = 0.9

local Admission = {}
Admission.__index = Admission

--- new(workers_per_gpu) -> admission state of one pool
function M.new(workers_per_gpu)
  -- devices: device -> {total, tickets = {ticket = true}, drainer = task waiting to run alone}
  -- footprints: problem key -> bytes (FOOTPRINT_FACTOR times the largest reference peak seen)
  return setmetatable({ workers = workers_per_gpu, devices = {}, footprints = {} }, Admission)
end

local function key(job) return tostring(job.problem) .. "\0" .. tostring(job.dtype or "") end

function Admission:_device(device)
  local d = self.devices[device]
  if not d then
    d = { tickets = {} }
    self.devices[device] = d
  end
  return d
end

--- set_total(device, bytes): the device's total memory (the worker's ready line,
--- gpu_memory_bytes); nil leaves the device unadmitted (CPU mode, or no figure).
function Admission:set_total(device, bytes)
  if type(bytes) == "number" and bytes > 0 then self:_device(device).total = bytes end
end

function Admission:usable(device)
  local d = self.devices[device]
  return d and d.total and math.floor(d.total * M.USABLE_SHARE) or nil
end

--- footprint(job) -> bytes, or nil while no job of its problem reported its reference's peak
function Admission:footprint(job) return self.footprints[key(job)] end

--- learn(job, result): the problem's footprint from a result's reference peak (result.memory)
function Admission:learn(job, result)
  local peak = type(result) == "table" and type(result.memory) == "table" and result.memory.reference_peak_bytes
  if type(peak) ~= "number" or peak <= 0 then return end
  local k, fp = key(job), peak * M.FOOTPRINT_FACTOR
  if not self.footprints[k] or fp > self.footprints[k] then self.footprints[k] = fp end
end

--- plan(device, job, alone) -> need {bytes, alone, budget}: what the job reserves on the device.
--- alone: the whole usable memory and no other job beside it (a problem whose peak is not yet
--- known, one whose footprint does not fit, or a job run again after it ran out beside others).
--- Otherwise the larger of its footprint and an equal share of the usable memory among the
--- device's workers (its budget: kagent_eval keeps its adaptive buffers inside it).
function Admission:plan(device, job, alone)
  local usable = self:usable(device)
  -- CPU mode, or a request of no problem (the device's peaks): nothing to reserve
  if not usable or (job.problem == nil and not alone) then return { bytes = 0, alone = alone == true } end
  local fp = self:footprint(job)
  if alone or not fp or fp > usable then return { bytes = usable, alone = true } end
  local bytes = math.max(fp, math.floor(usable / self.workers))
  -- a device of one worker never shares: its job keeps the GPU's free memory, no budget
  return { bytes = bytes, alone = false, budget = self.workers > 1 and bytes or nil }
end

local function live(t) return t and t.status ~= "dead" end

--- fits(device, need, me) -> whether the device admits the need now. A job waiting to run
--- alone (drainer) holds back every other admission there, so a stream of shared jobs cannot
--- starve it.
function Admission:fits(device, need, me)
  local d = self:_device(device)
  if live(d.drainer) and d.drainer ~= me then return false end
  local used, n = 0, 0
  for t in pairs(d.tickets) do used, n = used + t.bytes, n + 1 end
  if need.alone then return n == 0 end
  local usable = self:usable(device)
  return not usable or used + need.bytes <= usable
end

--- wait_alone(device, me): me waits for the device to empty; stop_waiting(me) -> whether me
--- held a device back until now
function Admission:wait_alone(device, me)
  local d = self:_device(device)
  if not live(d.drainer) then d.drainer = me end
end

function Admission:stop_waiting(me)
  local was
  for _, d in pairs(self.devices) do
    if d.drainer == me then d.drainer, was = nil, d end
  end
  return was ~= nil
end

--- draining(device, me) -> whether me holds back the device's admissions
function Admission:draining(device, me) return self:_device(device).drainer == me end

--- admit(device, need, me) -> ticket {device, bytes, alone, budget, shared}: shared turns true
--- for every job that ran beside another on its device (admitted while it ran, or before it).
function Admission:admit(device, need, me)
  self:stop_waiting(me)
  local d = self:_device(device)
  local t = { device = device, bytes = need.bytes, alone = need.alone, budget = need.budget, shared = false }
  for other in pairs(d.tickets) do
    other.shared, t.shared = true, true
  end
  d.tickets[t] = true
  return t
end

function Admission:release(ticket)
  if ticket then self:_device(ticket.device).tickets[ticket] = nil end
end

--- jobs_at_once(device, job) -> how many jobs of job's problem the device runs at once
--- (min(workers per GPU, floor(usable / reservation))), or nil while its footprint is unknown
function Admission:jobs_at_once(device, job)
  local usable = self:usable(device)
  if not usable then return self.workers end
  local need = self:plan(device, job)
  if need.alone then return self:footprint(job) and 1 or nil end
  return math.min(self.workers, math.floor(usable / need.bytes))
end

local function gib(bytes)
  return type(bytes) == "number" and string.format("%.2f GiB", bytes / 2 ^ 30) or "? GiB"
end

--- memory_error(oom, stage, error) -> the EMEMORY error of a job that ran out of GPU memory with
--- its GPU to itself (oom: result.out_of_memory, the sizes kagent_eval read from CUDA's error)
function M.memory_error(oom, stage, err)
  local whose = tostring(err):match("EREFERENCE") and "the problem's reference" or "the kernel"
  return string.format("EMEMORY: %s ran out of GPU memory with the GPU to itself (no other job of this pool "
    .. "on it) in stage %s: tried to allocate %s, %s free of %s total. It needs more GPU memory than "
    .. "this GPU has: use smaller inputs or a GPU with more memory (%s)", whose, tostring(stage),
    gib(oom.tried_bytes), gib(oom.free_bytes), gib(oom.total_bytes), tostring(err):match("[^\n]*"):sub(1, 300))
end

--- record(ticket, job) -> result.admission: what the job was admitted with
function Admission:record(ticket, job)
  local usable = self:usable(ticket.device)
  return { footprint_bytes = self:footprint(job), reserved_bytes = usable and ticket.bytes or nil,
    usable_bytes = usable, total_bytes = self.devices[ticket.device].total, alone = ticket.alone,
    shared = ticket.shared, jobs_at_once = self:jobs_at_once(ticket.device, job) }
end

return M
