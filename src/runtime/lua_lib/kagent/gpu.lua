-- kagent.gpu: the evaluator pool. Workers are `python3 -m kagent_eval.worker` processes (one per
-- GPU, or one CPU-mode worker) spoken to with JSON lines; each job's candidate runs in a process
-- the worker forks, and the verdict comes from the worker. One job at a time per worker keeps a
-- GPU exclusive while it is timed. A worker that dies or stops answering is killed and respawned,
-- and the job still gets a result (ok=false, error "EWORKER: ...").
--
-- Secrets stay here: a worker starts with the allowed part of the environment only, and
-- everything it sends back (replies, stderr) passes through kagent.secrets' redaction on arrival.
local task = require("kagent.task")
local proc = require("kagent.proc")
local json = require("kagent.json")
local log = require("kagent.log")
local ktime = require("kagent.time")
local fs = require("kagent.fs")
local secrets = require("kagent.secrets")

local M = {}

local Pool = {}
Pool.__index = Pool

local DEFAULT_TIMEOUT = 900
local DEFAULT_START_TIMEOUT = 120
local OPS = { verify = true, benchmark = true, profile = true, evaluate = true }

-- json.null inside objects becomes nil, so `if r.error then` means what it says
local strip_nulls = json.strip_nulls

-- Tasks wait for an event of the pool (a worker freed, the workers started) on a semaphore of
-- their own in the list `self[list]`; wake() releases them all, in the order they came.
local function park(self, list)
  local s = task.semaphore(0)
  self[list] = self[list] or {}
  table.insert(self[list], s)
  s:acquire()
end

local function wake(self, list)
  local waiting = self[list] or {}
  self[list] = {}
  for _, s in ipairs(waiting) do s:release() end
end

-- The evaluator package's folder: src/gpu/eval in a checkout, eval/ in an installed share/kagent-rt.
local function eval_dir()
  local root = require("kagent").root
  local fs = require("kagent.fs")
  if fs.is_dir(root .. "/eval/kagent_eval") then return root .. "/eval" end
  return root .. "/src/gpu/eval"
end

-- The worker must be the evaluator shipped with this binary: its protocol and checks move together.
local function version_error(ready, python)
  local want = require("kagent").version
  if ready.version == want then return nil end
  return string.format("EWORKER: evaluator version %s (kagent_eval from %s, run by %s) does not match "
    .. "kagent-rt %s. Use the evaluator shipped with this kagent-rt: remove the other kagent_eval from "
    .. "that python (pip uninstall kagent-eval) or install this one there (pip install %s)",
    tostring(ready.version or "unknown: its ready line has none"), tostring(ready.package or "?"), python,
    want, eval_dir())
end

--- pool(opts) -> pool. Workers start on first use (this call does not yield).
function M.pool(opts)
  opts = opts or {}
  if type(opts) ~= "table" then error("gpu.pool: opts must be a table", 2) end
  local devices = opts.devices
  if devices ~= nil and devices ~= "cpu" and type(devices) ~= "table" then
    error("gpu.pool: devices must be an array of GPU indices or \"cpu\"", 2)
  end
  if type(devices) == "table" then
    for i, d in ipairs(devices) do
      if type(d) ~= "number" then error("gpu.pool: devices[" .. i .. "] is not a number", 2) end
    end
  end
  local wpg = opts.workers_per_gpu or 1
  if type(wpg) ~= "number" or wpg < 1 then error("gpu.pool: workers_per_gpu must be >= 1", 2) end
  return setmetatable({
    want_devices = devices,
    python = opts.python or os.getenv("KAGENT_PYTHON") or "python3",
    workers_per_gpu = math.floor(wpg),
    timeout = opts.timeout or DEFAULT_TIMEOUT,
    start_timeout = opts.start_timeout or DEFAULT_START_TIMEOUT,
    env = opts.env,
    log_dir = opts.log_dir,
    workers = nil,
    starting = nil,
    closed = false,
    counters = { jobs = 0, failures = 0, respawns = 0 },
  }, Pool)
end

--- gpus() ⏸ -> the indices of the GPUs nvidia-smi lists (empty when none, or no nvidia-smi).
function M.gpus()
  local r = proc.run({ "nvidia-smi", "-L" }, { timeout = 30 })
  local list = {}
  if r and r.code == 0 then
    for idx in tostring(r.stdout):gmatch("GPU (%d+):") do list[#list + 1] = tonumber(idx) end
  end
  return list
end

-- Every GPU nvidia-smi lists, or "cpu" when there is none (or no nvidia-smi).
local function detect_devices()
  local list = M.gpus()
  if #list == 0 then return "cpu" end
  return list
end

-- The worker's whole environment: the allow-list's part of ours (kagent.secrets), the evaluator
-- on PYTHONPATH, and the pool's `env` filtered the same way.
function Pool:_env()
  local path = eval_dir()
  local old = os.getenv("PYTHONPATH")
  local extra = { PYTHONPATH = (old and old ~= "") and (path .. ":" .. old) or path,
    PYTHONUNBUFFERED = "1" }
  for k, v in pairs(self.env or {}) do extra[k] = v end
  return secrets.worker_env(extra)
end

-- Appends what the worker wrote to stderr (candidate prints, tracebacks) to its log file, redacted.
-- Only whole lines go out (the rest waits for the next call), so a secret is never cut in two.
function Pool:_drain(w, final)
  local text, dropped = w.proc:take_stderr()
  text = (w.stderr_carry or "") .. text
  local cut = final and #text or (text:match(".*()\n") or 0)
  w.stderr_carry = text:sub(cut + 1)
  text = secrets.redact(text:sub(1, cut))
  if dropped > 0 then text = text .. string.format("[kagent-rt: %d bytes of stderr dropped]\n", dropped) end
  if w.log_path and text ~= "" then fs.append(w.log_path, text) end
end

-- Spawns one worker and waits for its ready line.
function Pool:_spawn(device, slot)
  local argv = { self.python, "-m", "kagent_eval.worker", "--device", tostring(device) }
  local p, err = proc.spawn(argv, { stdin = true, env = self:_env(), clear_env = true,
    max_output = 4 * 1048576 })
  if not p then return nil, "EWORKER: cannot start the evaluator worker: " .. tostring(err) end
  local w = { proc = p, device = device, slot = slot, busy = false, next_id = 0,
    log_path = self.log_dir and string.format("%s/worker-%s-%d.log", self.log_dir, tostring(device), slot) }
  local deadline = ktime.now() + self.start_timeout
  while true do
    local line, rerr = p:read_line(math.max(0.1, deadline - ktime.now()))
    if not line then
      p:kill("KILL")
      local r = p:wait(5)
      local tail = secrets.redact(tostring(w.stderr_carry or "") .. tostring(r and r.stderr or "")):sub(-800)
      return nil, "EWORKER: worker for device " .. tostring(device) .. " did not start (" ..
        tostring(rerr) .. ") " .. tail
    end
    local msg = json.decode(line)
    if type(msg) == "table" and msg.ready then
      local verr = version_error(msg, self.python)
      if verr then
        p:kill("KILL")
        p:wait(5)
        return nil, verr
      end
      w.info = secrets.redact_tree(strip_nulls(msg))
      self:_drain(w)
      if w.info.sandbox and #(w.info.sandbox.missing or {}) > 0 then
        log.warn("gpu: the sandbox of the worker for device %s lacks: %s", tostring(device),
          table.concat(w.info.sandbox.missing, "; "))
      end
      return w
    end
    log.warn("gpu: ignoring a line from the worker before it was ready: %s", line:sub(1, 200))
  end
end

-- Starts the workers once; concurrent first callers wait for the same start.
function Pool:_ensure()
  if self.closed then return nil, "EWORKER: pool is closed" end
  if self.workers then return true end
  if self.starting then
    park(self, "start_waiters")
    if self.workers then return true end
    return nil, self.start_error
  end
  self.starting = true
  local devices = self.want_devices or detect_devices()
  if devices == "cpu" then devices = { "cpu" } end
  local fns = {}
  for _, d in ipairs(devices) do
    local n = (d == "cpu") and 1 or self.workers_per_gpu
    for s = 1, n do fns[#fns + 1] = function() return self:_spawn(d, s) end end
  end
  local results = task.all(fns)
  local workers, errs = {}, {}
  for _, r in ipairs(results) do
    if r.ok and r[1] then workers[#workers + 1] = r[1]
    else errs[#errs + 1] = tostring(r[2] or r[1]) end
  end
  if #errs > 0 then log.warn("gpu: %d worker(s) failed to start: %s", #errs, errs[1]) end
  self.starting = nil
  if #workers == 0 then
    self.start_error = errs[1] or "EWORKER: no worker started"
    wake(self, "start_waiters")
    return nil, self.start_error, "EWORKER"
  end
  self.workers = workers
  wake(self, "start_waiters")
  return true
end

--- devices() -> array of {device, mode, gpu_name, torch, triton, sandbox} | nil, "EWORKER: ...", "EWORKER"
function Pool:devices()
  task._running_task("pool:devices")
  local ok, err = self:_ensure()
  if not ok then return nil, err, "EWORKER" end
  local out, seen = {}, {}
  for _, w in ipairs(self.workers) do
    if not seen[w.device] then
      seen[w.device] = true
      local i = w.info
      out[#out + 1] = { device = i.device, mode = i.mode, gpu_name = i.gpu_name, torch = i.torch,
        triton = i.triton, sandbox = i.sandbox }
    end
  end
  return out
end

-- A free worker (optionally of one device), marked busy; waits while all are busy.
function Pool:_acquire(device)
  while true do
    local any = false
    for _, w in ipairs(self.workers) do
      if device == nil or w.device == device then
        any = true
        if not w.busy then
          w.busy = true
          return w
        end
      end
    end
    if not any then return nil, "EBADREQ: no worker for device " .. tostring(device) end
    park(self, "free_waiters")
  end
end

-- Marks a worker free and wakes the tasks waiting for one (each looks again).
function Pool:_release(w)
  w.busy = false
  wake(self, "free_waiters")
end

-- Kills a broken worker and starts a new one in its place (same device and slot).
function Pool:_respawn(w, why)
  log.warn("gpu: restarting the worker for device %s: %s", tostring(w.device), why)
  -- TERM first: the worker then kills its sandboxes and what they started (KILL follows)
  w.proc:kill("TERM")
  pcall(function() w.proc:wait(5) end)
  pcall(self._drain, self, w, true)
  self.counters.respawns = self.counters.respawns + 1
  local nw, err = self:_spawn(w.device, w.slot)
  if nw then
    for k, v in pairs(nw) do w[k] = v end
  else
    w.dead = true
    log.error("gpu: worker for device %s did not restart: %s", tostring(w.device), tostring(err))
  end
end

-- One request/reply with a worker; nil, err when the worker broke (it is respawned).
function Pool:_request(w, op, job, wall)
  if w.dead then
    self:_respawn(w, "previous restart failed")
    if w.dead then return nil, "EWORKER: worker for device " .. tostring(w.device) .. " is down" end
  end
  w.next_id = w.next_id + 1
  local id = w.next_id
  local line = json.encode({ id = id, op = op, job = job })
  local ok, err = w.proc:write(line .. "\n")
  if not ok then
    self:_respawn(w, "write failed: " .. tostring(err))
    return nil, "EWORKER: the worker died before the job (" .. tostring(err) .. ")"
  end
  local deadline = ktime.now() + wall
  while true do
    local left = deadline - ktime.now()
    local reply, rerr
    if left > 0 then reply, rerr = w.proc:read_line(left) else rerr = "ETIMEDOUT: no reply" end
    if not reply then
      local why = tostring(rerr):match("^ETIMEDOUT") and
        string.format("no reply in %.0f s (killed)", wall) or "the worker died (" .. tostring(rerr) .. ")"
      self:_respawn(w, why)
      return nil, "EWORKER: " .. why
    end
    local msg = json.decode(reply)
    if type(msg) == "table" and msg.id == id then
      self:_drain(w)
      return secrets.redact_tree(strip_nulls(msg))
    end
    log.warn("gpu: unexpected line from the worker: %s", reply:sub(1, 200))
  end
end

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

function Pool:_job(op, job)
  local fname = "pool:" .. op
  check_job(fname, job)
  task._running_task(fname)
  local ok, err = self:_ensure()
  if not ok then return { ok = false, stage = "worker", error = err, code = "EWORKER" } end
  local w, aerr = self:_acquire(job.device)
  if not w then return { ok = false, stage = "worker", error = aerr, code = "EBADREQ" } end
  local t0 = ktime.now()
  self.counters.jobs = self.counters.jobs + 1
  local okc, reply, rerr = pcall(self._request, self, w, op, wire_job(job), job.wall_timeout or self.timeout)
  self:_release(w)
  if not okc then error(reply, 0) end
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
  if not result.ok then self.counters.failures = self.counters.failures + 1 end
  result.device = result.device or w.device
  result.wall = ktime.now() - t0
  return result
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
  local ok, err = self:_ensure()
  if not ok then return { ok = false, error = err } end
  local w, aerr = self:_acquire(device)
  if not w then return { ok = false, error = aerr } end
  local okc, reply, rerr = pcall(self._request, self, w, "peaks", {}, self.timeout)
  self:_release(w)
  if not okc then error(reply, 0) end
  if not reply then return { ok = false, error = rerr } end
  if not reply.ok then return { ok = false, error = reply.error } end
  return reply.result
end

--- stats() -> {jobs, failures, respawns, busy}
function Pool:stats()
  local busy = 0
  for _, w in ipairs(self.workers or {}) do if w.busy then busy = busy + 1 end end
  return { jobs = self.counters.jobs, failures = self.counters.failures,
    respawns = self.counters.respawns, busy = busy }
end

--- close(): stops the workers (their sandboxes die with them).
function Pool:close()
  self.closed = true
  for _, w in ipairs(self.workers or {}) do
    pcall(function() w.proc:close_stdin() end)
    pcall(function() w.proc:kill("TERM") end)
    pcall(self._drain, self, w, true)
  end
  self.workers = nil
  return true
end

M._strip_nulls = strip_nulls
M._eval_dir = eval_dir
return M
