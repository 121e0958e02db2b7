-- kagent.gpu, the pool: its workers (workers_per_gpu per GPU, or per CPU device), started on
-- first use, and which free worker takes each job. One job at a time per worker; where several
-- workers share a device, they hold the device's lease (kagent.gpu.lease): shared for untimed GPU
-- work, exclusive for each timed or profiled phase, so nothing else runs on the device while a
-- figure is measured. The worker process is kagent/gpu/worker.lua, the jobs kagent/gpu/jobs.lua.
local task = require("kagent.task")
local log = require("kagent.log")
local gpu_devices = require("kagent.gpu.devices")
local lease = require("kagent.gpu.lease")
local admission = require("kagent.gpu.admission")
local worker_log = require("kagent.gpu.worker_log")

local M = {}

local Pool = {}
Pool.__index = Pool
M.Pool = Pool

local DEFAULT_TIMEOUT = 900
local DEFAULT_START_TIMEOUT = 120

--- new(opts) -> pool (kagent.gpu.pool). Workers start on first use (this call does not yield).
function M.new(opts)
  opts = opts or {}
  if type(opts) ~= "table" then error("gpu.pool: opts must be a table", 2) end
  local devices = opts.devices
  if devices ~= nil and devices ~= "cpu" and type(devices) ~= "table" then
    error("gpu.pool: devices must be an array of GPU numbers (positions in gpu.gpus()) or \"cpu\"", 2)
  end
  if type(devices) == "table" then
    for i, d in ipairs(devices) do
      if type(d) ~= "number" or d < 0 or d % 1 ~= 0 then
        error("gpu.pool: devices[" .. i .. "] is not a GPU number (0, 1, ...)", 2)
      end
    end
  end
  local wpg, wpg_from = opts.workers_per_gpu, "set"
  if wpg == nil then
    local env = os.getenv("KAGENT_WORKERS_PER_GPU")
    if env and env ~= "" then
      wpg, wpg_from = env == "auto" and env or tonumber(env), "KAGENT_WORKERS_PER_GPU"
      if not wpg or (wpg ~= "auto" and (wpg < 1 or wpg % 1 ~= 0)) then
        error("gpu.pool: KAGENT_WORKERS_PER_GPU must be a whole number >= 1 or auto, not '" .. env .. "'", 2)
      end
    else
      -- 1 until the pipelined pool has passed its GPU checks (bench/device_suite.sh throughput
      -- and lease: jobs per minute, and no interference with a timing); "auto" asks for it
      wpg, wpg_from = 1, "default"
    end
  end
  if wpg ~= "auto" and (type(wpg) ~= "number" or wpg < 1) then
    error("gpu.pool: workers_per_gpu must be >= 1 or \"auto\"", 2)
  end
  return setmetatable({
    want_devices = devices,
    python = opts.python or os.getenv("KAGENT_PYTHON") or "python3",
    python_from = opts.python and "the pool's python option" or os.getenv("KAGENT_PYTHON") and "KAGENT_PYTHON"
      or "the default; KAGENT_PYTHON is not set",
    -- a number, or "auto" until the workers start (_ensure): then the number and how it was chosen
    workers_per_gpu = wpg == "auto" and wpg or math.floor(wpg),
    workers_how = wpg_from,
    timeout = opts.timeout or DEFAULT_TIMEOUT,
    start_timeout = opts.start_timeout or DEFAULT_START_TIMEOUT,
    env = opts.env,
    log_dir = opts.log_dir,
    workers = nil,
    starting = nil,
    closed = false,
    counters = { jobs = 0, failures = 0, respawns = 0 },
    -- device -> its lease (kagent.gpu.lease), for devices of several workers only
    leases = {},
    -- device -> {task = true}: the tasks of jobs pinned to it (job.device) waiting for a free
    -- worker (_acquire)
    queued = {},
    -- the events tasks wait for: a worker freed (_acquire), the workers' start over (_ensure)
    freed = task.condition(),
    started = task.condition(),
  }, Pool)
end

-- Starts the workers once; concurrent first callers wait for the same start.
function Pool:_ensure()
  if self.closed then return nil, "EWORKER: pool is closed" end
  if self.workers then return true end
  if self.starting then
    self.started:wait()
    if self.workers then return true end
    return nil, self.start_error
  end
  self.starting = true
  -- pool devices are positions in the list of GPUs this process may use (default: all of them)
  local devices, allowed = self.want_devices, {}
  if devices ~= "cpu" then allowed = gpu_devices.gpus() end
  if devices == nil and #allowed > 0 then
    devices = {}
    for i = 1, #allowed do devices[i] = i - 1 end
  end
  if devices == nil or devices == "cpu" then devices = { "cpu" } end
  if self.workers_per_gpu == "auto" then
    if devices[1] == "cpu" then
      self.workers_per_gpu, self.workers_how = 1, "auto: 1 in CPU mode"
    else
      local a = gpu_devices.auto_workers_per_gpu({ gpus = #allowed })
      self.workers_per_gpu, self.workers_how = a.workers, "auto: " .. a.rule
    end
  end
  local fns = {}
  for _, d in ipairs(devices) do
    local n = self.workers_per_gpu
    if n > 1 then self.leases[d] = lease.new() end
    local g = (d ~= "cpu") and allowed[d + 1] or nil
    if d ~= "cpu" and not g then
      local why = string.format("EWORKER: there is no GPU %d among the %d this process may use (gpu.gpus())", d, #allowed)
      fns[#fns + 1] = function() return nil, why end
    else
      for s = 1, n do fns[#fns + 1] = function() return self:_spawn(d, s, g) end end
    end
  end
  local results = task.all(fns)
  local workers, errs = {}, {}
  for _, r in ipairs(results) do
    if r.ok and r[1] then workers[#workers + 1] = r[1]
    else errs[#errs + 1] = tostring(r[2] or r[1]) end
  end
  -- when none started, the caller's error says why (once); a partial start is only a warning
  if #errs > 0 and #workers > 0 then log.warn("gpu: %d worker(s) failed to start: %s", #errs, errs[1]) end
  self.starting = nil
  if #workers == 0 then
    self.start_error = errs[1] or "EWORKER: no worker started"
    self.started:notify_all()
    return nil, self.start_error, "EWORKER"
  end
  self.workers = workers
  -- GPU memory admission (kagent.gpu.admission): each device's total from its workers' ready lines
  self.admission = admission.new(self.workers_per_gpu)
  for _, w in ipairs(workers) do self.admission:set_total(w.device, w.info.gpu_memory_bytes) end
  self.started:notify_all()
  return true
end

--- devices() -> array of {device, mode, gpu, gpu_name, torch, triton, sandbox, job_defaults, baselines, reported_baselines, tolerances, workers, workers_how, gpu_memory_bytes} | nil, "EWORKER: ...", "EWORKER"
function Pool:devices()
  task._running_task("pool:devices")
  local ok, err = self:_ensure()
  if not ok then return nil, err, "EWORKER" end
  local out, seen = {}, {}
  for _, w in ipairs(self.workers) do
    if not seen[w.device] then
      seen[w.device] = true
      local i = w.info
      out[#out + 1] = { device = w.device, mode = i.mode, gpu = gpu_devices.record(w.gpu),
        gpu_name = i.gpu_name or (w.gpu and w.gpu.name), torch = i.torch, triton = i.triton, sandbox = i.sandbox,
        job_defaults = i.job_defaults, baselines = i.baselines, reported_baselines = i.reported_baselines,
        tolerances = i.tolerances, workers = self.workers_per_gpu, workers_how = self.workers_how,
        gpu_memory_bytes = i.gpu_memory_bytes }
    end
  end
  return out
end

-- A device's load: its jobs running plus those waiting for it (pinned by job.device).
function Pool:_load(device)
  local n = 0
  for t in pairs(self.queued[device] or {}) do
    if t.status ~= "dead" then n = n + 1 end  -- a waiting task that was killed waits no more
  end
  for _, w in ipairs(self.workers) do
    if w.device == device and w.busy then n = n + 1 end
  end
  return n
end

-- A free worker, marked busy and admitted (w.ticket: kagent.gpu.admission); waits while none is
-- free on a device whose GPU memory admits the job (job: its problem and dtype; alone: run it with
-- the GPU to itself). Least-loaded dispatch: a job not pinned
-- to a device takes a free worker of the device with the fewest running + queued jobs (ties: the
-- lowest device number, the workers being listed in device order), so two jobs sent together to a
-- pool of several workers per GPU go to two GPUs. Jobs that find no free worker wait in one queue
-- for whichever device frees first (they are not bound to a device on arrival), so no device
-- idles while another has jobs waiting; a pinned job waits for its own device.
function Pool:_acquire(device, job, alone)
  local me = task.current()
  while true do
    local any, best, best_load = false, nil, math.huge
    local loads, needs, fits = {}, {}, {}
    -- what the job needs is looked at afresh each time (its problem's peak may be known now)
    local was_draining = self.admission:stop_waiting(me)
    for _, w in ipairs(self.workers) do
      if device == nil or w.device == device then
        any = true
        needs[w.device] = needs[w.device] or self.admission:plan(w.device, job or {}, alone)
        if fits[w.device] == nil then fits[w.device] = self.admission:fits(w.device, needs[w.device], me) end
        if not w.busy and fits[w.device] then
          loads[w.device] = loads[w.device] or self:_load(w.device)
          if loads[w.device] < best_load then best, best_load = w, loads[w.device] end
        end
      end
    end
    if best then
      best.busy = true
      best.ticket = self.admission:admit(best.device, needs[best.device], me)
      -- the jobs it held back look again: those that fit beside it go on now
      if was_draining then self.freed:notify_all() end
      return best
    end
    if not any then return nil, "EBADREQ: no worker for device " .. tostring(device) end
    -- a job that must run alone holds back new admissions on the device of fewest jobs until it
    -- empties (device order breaks ties), so that a stream of other jobs cannot starve it
    local drain, drain_load = nil, math.huge
    for d, need in pairs(needs) do
      local l = self:_load(d)
      if need.alone and (l < drain_load or (l == drain_load and tostring(d) < tostring(drain))) then
        drain, drain_load = d, l
      end
    end
    if drain ~= nil then self.admission:wait_alone(drain, me) end
    if was_draining and not (drain ~= nil and self.admission:draining(drain, me)) then self.freed:notify_all() end
    if device ~= nil then
      self.queued[device] = self.queued[device] or {}
      self.queued[device][me] = true
    end
    self.freed:wait()
    if device ~= nil then self.queued[device][me] = nil end
  end
end

-- Marks a worker free (and gives back its device's lease, if it held it) and wakes the tasks waiting for one (each looks again).
function Pool:_release(w)
  self:_lease_release(w)  -- a request that raised may have left it held
  self.admission:release(w.ticket)
  w.busy, w.ticket = false, nil
  self.freed:notify_all()
end

--- stats() -> {jobs, failures, respawns, busy}
function Pool:stats()
  local busy = 0
  for _, w in ipairs(self.workers or {}) do if w.busy then busy = busy + 1 end end
  return { jobs = self.counters.jobs, failures = self.counters.failures,
    respawns = self.counters.respawns, busy = busy }
end

--- close(wait_s): stops the workers (their sandboxes die with them). With wait_s, also waits
-- (yields) up to wait_s seconds for each to have ended, so that their folders can be removed
-- next without racing a worker's own clean-up; a worker still there then is killed.
function Pool:close(wait_s)
  self.closed = true
  local workers = self.workers or {}
  self.workers = nil
  for _, w in ipairs(workers) do
    pcall(function() w.proc:close_stdin() end)
    pcall(function() w.proc:kill("TERM") end)
    pcall(worker_log.drain, w, true)
  end
  if wait_s then
    for _, w in ipairs(workers) do pcall(function() w.proc:wait(wait_s) end) end
  end
  return true
end

require("kagent.gpu.worker").install(Pool)
require("kagent.gpu.jobs").install(Pool)

return M
