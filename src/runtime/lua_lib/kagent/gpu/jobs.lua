-- kagent.gpu, the jobs: the pool's verbs (verify, benchmark, ..., peaks), each one request to a
-- free worker, and the result it returns (never nil: a job that no worker could run is a result
-- with ok=false, stage "worker" or "request"). Installed into the pool's methods by
-- kagent/gpu/pool.lua.
local task = require("kagent.task")
local ktime = require("kagent.time")
local gpu_devices = require("kagent.gpu.devices")
local admission = require("kagent.gpu.admission")

local M = {}

local function check_job(fname, job)
  if type(job) ~= "table" then error(fname .. ": job must be a table", 3) end
  if fname == "pool:analyze" then return end  -- its fields depend on job.kind; the worker checks them
  if type(job.problem) ~= "string" then error(fname .. ": job.problem must be a path", 3) end
  if fname == "pool:compare" then
    if type(job.candidates) ~= "table" or #job.candidates < 2 then
      error(fname .. ": job.candidates must be a list of at least 2 paths or sources", 3)
    end
    return
  end
  if type(job.candidate) ~= "string" then error(fname .. ": job.candidate must be a path or source", 3) end
end

-- Copies the job without pool-only fields (device pinning, wall timeout).
local function wire_job(job)
  local out = {}
  for k, v in pairs(job) do
    if k ~= "device" and k ~= "wall_timeout" then out[k] = v end
  end
  return out
end

-- A job's candidate sources: source text as it is, a path read (the path itself where it cannot be).
local function sources_of(job)
  local out = {}
  for _, c in ipairs(job.candidates or { job.candidate }) do
    if type(c) == "string" and not c:find("\n", 1, true) then
      local f = io.open(c, "r")
      c = f and f:read("*a") or c
      if f then f:close() end
    end
    out[#out + 1] = c
  end
  return out
end

-- The wall limit of `job` on a worker whose ready line is `info`: `wall`, plus, for a candidate
-- that builds C++/CUDA with load_inline (its source names one of the ready line's
-- compile_markers, the worker's own rule), the bound of the worker's compile step
-- (info.compile_step_s), which lies outside the job's per-stage timeout: a cold nvcc build of
-- 100 s is normal, not a hung worker (src/gpu/eval/README.md, "C++ and CUDA candidates").
function M.wall_limit(info, job, wall)
  local extra = type(info) == "table" and tonumber(info.compile_step_s) or nil
  local markers = type(info) == "table" and info.compile_markers or nil
  if not extra or type(markers) ~= "table" then return wall end
  for _, src in ipairs(sources_of(job)) do
    for _, m in ipairs(markers) do
      if type(src) == "string" and type(m) == "string" and src:find(m, 1, true) then return wall + extra end
    end
  end
  return wall
end

function M.install(Pool)
  -- One request on a free worker (of `device`, if given) that the GPU's memory admits (alone: with
  -- the GPU to itself) -> w, reply, nil, ticket | w, nil, err, ticket (the worker broke) | nil, err,
  -- code (no worker could take it: the pool did not start, or no such device). on_start() runs
  -- once the worker is taken, before the request. The job's budget goes with it
  -- (memory_budget_bytes), and its problem's footprint is learned before the worker is freed, so
  -- the jobs waiting for it are admitted by it.
  function Pool:_on_worker(device, op, job, wall, on_start, alone)
    local ok, err = self:_ensure()
    if not ok then return nil, err, "EWORKER" end
    local w, aerr = self:_acquire(device, job, alone)
    if not w then return nil, aerr, "EBADREQ" end
    local ticket = w.ticket
    job.memory_budget_bytes = ticket.budget
    if on_start then on_start() end
    local okc, reply, rerr = pcall(self._request, self, w, op, job, M.wall_limit(w.info, job, wall))
    if okc and type(reply) == "table" and reply.ok then self.admission:learn(job, reply.result) end
    self:_release(w)
    if not okc then error(reply, 0) end
    return w, reply, rerr, ticket
  end

  -- A job; one that ran out of GPU memory beside other jobs runs again alone before any verdict,
  -- and one that ran out alone is EMEMORY (kagent.gpu.admission; docs/lua-api.md).
  function Pool:_job(op, job)
    local fname = "pool:" .. op
    check_job(fname, job)
    task._running_task(fname)
    local result, ticket = self:_job_once(op, job)
    if type(result.out_of_memory) == "table" and ticket and ticket.shared then
      local first = result
      result, ticket = self:_job_once(op, job, true)
      result.rerun_alone = { error = first.error, wall = first.wall, admission = first.admission }
    end
    if type(result.out_of_memory) == "table" and ticket and not ticket.shared then
      result.ok, result.code = false, "EMEMORY"
      result.error = admission.memory_error(result.out_of_memory, result.stage, result.error)
    end
    if not result.ok and ticket then self.counters.failures = self.counters.failures + 1 end
    return result
  end

  -- One run of a job -> result, its admission ticket (nil where no worker took it).
  function Pool:_job_once(op, job, alone)
    local t0
    local w, reply, rerr, ticket = self:_on_worker(job.device, op, wire_job(job), job.wall_timeout or self.timeout,
      function()
        t0 = ktime.now()
        self.counters.jobs = self.counters.jobs + 1
      end, alone)
    if not w then return { ok = false, stage = "worker", error = reply, code = rerr } end
    local result
    if not reply then
      result = { ok = false, stage = "worker", error = rerr, code = "EWORKER" }
    elseif not reply.ok then
      -- refused before any candidate code ran: a bad request, or the worker's own failure
      local stage = (reply.code == "EBADREQ" or reply.code == "EPARSE") and "request" or "worker"
      result = { ok = false, stage = stage, error = reply.error, code = reply.code }
    else
      result = reply.result
    end
    -- which device measured it: the pool's number for it (what job.device pins) and the GPU itself
    -- (nil in CPU mode); the worker's own "cuda:0" names only its one visible GPU
    result.device = w.device
    result.gpu = gpu_devices.record(w.gpu)
    result.wall = ktime.now() - t0
    result.lease_wait_s = w.lease_wait or 0
    result.lease_shared_wait_s = w.shared_wait or 0
    if w.holds and #w.holds > 0 then result.lease_holds = w.holds end
    result.admission = self.admission:record(ticket, job)
    return result, ticket
  end

  --- verify/benchmark/profile/evaluate(job) -> result table (never nil). See docs/lua-api.md.
  function Pool:verify(job) return self:_job("verify", job) end
  function Pool:benchmark(job) return self:_job("benchmark", job) end
  function Pool:profile(job) return self:_job("profile", job) end
  function Pool:evaluate(job) return self:_job("evaluate", job) end
  --- compare(job) -> interleaved timing of job.candidates in one process. See docs/lua-api.md.
  function Pool:compare(job) return self:_job("compare", job) end
  --- sanitize(job) -> compute-sanitizer (memcheck, racecheck) on one forward. See docs/lua-api.md.
  function Pool:sanitize(job) return self:_job("sanitize", job) end
  --- analyze(job) -> static analysis (traced graph, hot path, merged sources). See docs/lua-api.md.
  function Pool:analyze(job) return self:_job("analyze", job) end

  --- peaks(device) -> measured peaks of a device ({ok=true, ...}) or {ok=false, error}
  function Pool:peaks(device)
    task._running_task("pool:peaks")
    local w, reply, rerr = self:_on_worker(device, "peaks", {}, self.timeout)
    if not w then return { ok = false, error = reply } end
    if not reply then return { ok = false, error = rerr } end
    if not reply.ok then return { ok = false, error = reply.error } end
    return reply.result
  end
end

return M
