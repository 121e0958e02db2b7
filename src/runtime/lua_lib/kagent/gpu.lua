-- kagent.gpu: the evaluator pool. Workers are `python3 -m kagent_eval.worker` processes
-- (workers_per_gpu per GPU, or per CPU device) spoken to with JSON lines; each job's candidate
-- runs in a process the worker forks, and the verdict comes from the worker. One job at a time
-- per worker; where several workers share a device, they hold the device's lease
-- (kagent.gpu_lease): shared for untimed GPU work, exclusive for each timed or profiled phase, so
-- nothing else runs on the device while a figure is measured. A worker that dies
-- or stops answering is killed and respawned, and the job still gets a result (ok=false, error
-- "EWORKER: ...").
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
local gpu_lease = require("kagent.gpu_lease")

local M = {}

local Pool = {}
Pool.__index = Pool

local DEFAULT_TIMEOUT = 900
local DEFAULT_START_TIMEOUT = 120

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

local function eval_dir() return require("kagent.search_path").eval_dir(require("kagent").root) end

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

-- The automatic number of workers per GPU (a pool's workers_per_gpu = "auto"): each worker
-- keeps about one core busy compiling (Triton, Inductor) while it prepares its candidate process,
-- and holds a torch process and a candidate with its inputs in host memory; more than MAX adds
-- little, since every timed stage waits for the GPU's exclusive lease. CPU mode keeps 1 (there
-- the workers' own stages compete for the same cores the timing measures).
M.AUTO_WORKERS = { cores_per_worker = 4, memory_gib_per_worker = 8, max = 4 }

-- the cores this process may run on (sched affinity: a Slurm job's share) and the host memory it
-- may use (MemTotal, or a smaller cgroup v2 limit)
local function host_cores()
  local r = proc.run({ "nproc" }, { timeout = 10 })
  return r and r.code == 0 and tonumber((r.stdout:gsub("%s+", ""))) or 1
end

local function host_memory()
  local kib = tonumber((fs.read("/proc/meminfo") or ""):match("MemTotal:%s*(%d+)"))
  local bytes = kib and kib * 1024 or 0
  local limit = tonumber(((fs.read("/sys/fs/cgroup/memory.max")) or ""):match("^%s*(%d+)"))
  if limit and (bytes == 0 or limit < bytes) then bytes = limit end
  return bytes
end

--- auto_workers_per_gpu({cores, memory_bytes, gpus}) ⏸ -> {workers, cores, memory_bytes, gpus, rule}.
--- Fields not given are read from this host (cores: nproc; memory: /proc/meminfo and the cgroup's
--- limit; gpus: #gpu.gpus()). See docs/lua-api.md.
function M.auto_workers_per_gpu(o)
  o = o or {}
  local a = M.AUTO_WORKERS
  local cores = o.cores or host_cores()
  local mem = o.memory_bytes or host_memory()
  local gpus = math.max(1, o.gpus or #M.gpus())
  local gib_per_gpu = mem / gpus / 2 ^ 30
  local by_cores = math.floor(cores / gpus / a.cores_per_worker)
  local by_mem = math.floor(gib_per_gpu / a.memory_gib_per_worker)
  local n = math.max(1, math.min(by_cores, by_mem, a.max))
  return { workers = n, cores = cores, memory_bytes = mem, gpus = gpus,
    rule = string.format("min(%g cores per GPU / %d, %.0f GiB per GPU / %d, %d)", cores / gpus,
      a.cores_per_worker, gib_per_gpu, a.memory_gib_per_worker, a.max) }
end

--- pool(opts) -> pool. Workers start on first use (this call does not yield).
function M.pool(opts)
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
    -- device -> its lease (kagent.gpu_lease), for devices of several workers only
    leases = {},
    -- device -> {task = true}: the tasks of jobs pinned to it (job.device) waiting for a free
    -- worker (_acquire)
    queued = {},
  }, Pool)
end

-- What `nvidia-smi -L` lists: the GPUs ({index, uuid, name}) and the MIG devices of MIG-enabled
-- ones ({index = their GPU's, uuid = "MIG-...", name = "<GPU name> MIG <profile>", mig = true}).
local function smi_list()
  local r = proc.run({ "nvidia-smi", "-L" }, { timeout = 30 })
  local gpus, migs = {}, {}
  if not (r and r.code == 0) then return gpus, migs end
  local parent
  for line in tostring(r.stdout):gmatch("[^\n]+") do
    local idx, rest = line:match("^GPU (%d+): (.*)$")
    if idx then
      local name, uuid = rest:match("^(.-)%s*%(UUID: ([^%)]+)%)")
      parent = { index = tonumber(idx), name = name or rest, uuid = uuid }
      gpus[#gpus + 1] = parent
    else
      local profile, uuid = line:match("^%s+MIG (%S+)%s+Device%s+%d+: %(UUID: ([^%)]+)%)")
      if profile and parent then
        migs[#migs + 1] = { index = parent.index, uuid = uuid, name = parent.name .. " MIG " .. profile, mig = true }
      end
    end
  end
  return gpus, migs
end

-- The device a CUDA_VISIBLE_DEVICES entry names, or nil when CUDA would find it invalid: a
-- nvidia-smi index, or a GPU-/MIG- UUID or a prefix of one that names a single device.
local function mask_entry(item, gpus, migs)
  if item:match("^%d+$") then
    for _, g in ipairs(gpus) do if g.index == tonumber(item) then return g end end
    return nil
  end
  if not (item:match("^GPU%-.") or item:match("^MIG%-.")) then return nil end
  local found
  for _, list in ipairs({ gpus, migs }) do
    for _, g in ipairs(list) do
      if g.uuid and g.uuid:sub(1, #item) == item then
        if found then return nil end  -- an ambiguous prefix names no device
        found = g
      end
    end
  end
  return found
end

--- gpus() ⏸ -> the GPUs this process may use, in the order of a pool's device numbers (0, 1, ...):
--- array of {index, uuid, name, mig, visible}. See docs/lua-api.md.
function M.gpus()
  local gpus, migs = smi_list()
  local mask = os.getenv("CUDA_VISIBLE_DEVICES")
  local allowed
  if mask == nil then
    allowed = gpus
  else
    -- CUDA's reading: entries in order; the first invalid one (-1, an unknown index or UUID, one
    -- named before) ends the list, so "" and "-1" allow none
    allowed = {}
    local seen = {}
    for item in (mask .. ","):gmatch("([^,]*),") do
      local g = mask_entry(item:match("^%s*(.-)%s*$"), gpus, migs)
      if not g or seen[g] then break end
      seen[g] = true
      allowed[#allowed + 1] = g
    end
  end
  local out = {}
  for i, g in ipairs(allowed) do
    -- a worker's mask names the device by UUID: the same device for CUDA whatever its
    -- CUDA_DEVICE_ORDER, and for nvidia-smi
    out[i] = { index = g.index, uuid = g.uuid, name = g.name, mig = g.mig or false,
      visible = g.uuid or tostring(g.index) }
  end
  return out
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

-- What a worker's stderr (candidate prints, tracebacks: untrusted) may cost the runtime: its
-- log gets lines of at most MAX_LOG_LINE bytes (the head of a longer one, then how much was
-- dropped), the stream is taken at most 4 MiB at a time (the rest is dropped by proc), and every
-- step is linear in what arrived, so no output stalls the event loop.
M.MAX_LOG_LINE = 65536
-- a worker's reply (one line of its stdout, which candidates never reach: their prints go to
-- stderr) and each stream's unread buffer: 4 MiB
M.MAX_REPLY = 4 * 1048576
-- bytes held back from the end of a cut line's head: a secret that straddles the cut is never
-- written in part (the head is redacted whole first)
local SECRET_MARGIN = 512

local function cut_line(line)
  local head = secrets.redact(line:sub(1, M.MAX_LOG_LINE))
  head = head:sub(1, math.max(0, #head - SECRET_MARGIN))
  return head, #line - (M.MAX_LOG_LINE - SECRET_MARGIN)
end

-- capped(text) -> whole lines (text ends with "\n" or is empty), each over MAX_LOG_LINE cut to
-- its head, redacted
local function capped(text)
  if #text <= M.MAX_LOG_LINE then return secrets.redact(text) end
  local out = {}
  for line in text:gmatch("([^\n]*)\n") do
    if #line > M.MAX_LOG_LINE then
      local head, dropped = cut_line(line)
      out[#out + 1] = string.format("%s [kagent-rt: %d more bytes of this line dropped]", head, dropped)
    else
      out[#out + 1] = secrets.redact(line)
    end
  end
  out[#out + 1] = ""
  return table.concat(out, "\n")
end

-- Appends what the worker wrote to stderr to its log file, redacted. Only whole lines go out
-- (the rest waits for the next call), so a secret is never cut in two; a line still arriving
-- past MAX_LOG_LINE has its head written and the rest of it dropped as it comes.
function Pool:_drain(w, final)
  local chunk, dropped = w.proc:take_stderr()
  local out = {}
  if w.stderr_skip then  -- the rest of a line whose head was written
    local nl = chunk:find("\n", 1, true)
    if not nl then
      w.stderr_skip, chunk = w.stderr_skip + #chunk, ""
    else
      out[#out + 1] = string.format("[kagent-rt: %d more bytes of that line dropped]\n", w.stderr_skip + nl - 1)
      w.stderr_skip, chunk = nil, chunk:sub(nl + 1)
    end
  end
  local text = (w.stderr_carry or "") .. chunk
  if final and text ~= "" and text:sub(-1) ~= "\n" then text = text .. "\n" end
  -- the last newline, found in one pass (a pattern that backtracks from every start would take
  -- time in the square of a long line's length)
  local cut = (text:find("\n[^\n]*$")) or 0
  local rest = text:sub(cut + 1)
  out[#out + 1] = capped(text:sub(1, cut))
  if #rest > M.MAX_LOG_LINE then
    local head, _ = cut_line(rest)
    out[#out + 1] = head .. " [kagent-rt: the rest of this line is dropped]\n"
    w.stderr_skip, rest = 0, ""
  end
  w.stderr_carry = rest
  if dropped > 0 then out[#out + 1] = string.format("[kagent-rt: %d bytes of stderr dropped]\n", dropped) end
  local text_out = table.concat(out)
  if w.log_path and text_out ~= "" then fs.append(w.log_path, text_out) end
end

-- Spawns one worker and waits for its ready line. gpu: the entry of gpus() for a GPU device,
-- whose `visible` mask the worker takes as its one GPU.
function Pool:_spawn(device, slot, gpu)
  local argv = { self.python, "-m", "kagent_eval.worker", "--device", gpu and gpu.visible or "cpu" }
  -- a device's only worker never asks for the lease: no round trip where nothing can collide
  if self.leases[device] then argv[#argv + 1] = "--lease" end
  -- a reply is one line of at most MAX_REPLY bytes: one longer is cut there (and fails the job at
  -- once, rather than filling the buffer and waiting out the job's wall limit)
  local p, err = proc.spawn(argv, { stdin = true, env = self:_env(), clear_env = true,
    max_output = M.MAX_REPLY, max_line = M.MAX_REPLY })
  if not p then return nil, "EWORKER: cannot start the evaluator worker: " .. tostring(err) end
  local w = { proc = p, device = device, slot = slot, gpu = gpu, busy = false, next_id = 0,
    log_path = self.log_dir and string.format("%s/worker-%s-%d.log", self.log_dir, tostring(device), slot) }
  local deadline = ktime.now() + self.start_timeout
  while true do
    local line, rerr = p:read_line(math.max(0.1, deadline - ktime.now()))
    if not line then
      p:kill("KILL")
      local r = p:wait(5)
      local tail = secrets.redact(tostring(w.stderr_carry or "") .. tostring(r and r.stderr or "")):sub(-800)
      local missing = tail:match("ModuleNotFoundError: No module named '([%w_.]+)'")
      if missing then
        -- the python lacks the evaluator's stack: one line naming it and the variable that picks it
        return nil, string.format("EWORKER: the evaluator's python %s (%s) cannot import %s: set KAGENT_PYTHON "
          .. "to a python that has torch (and triton on a GPU)", self.python, self.python_from, missing)
      end
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
  -- pool devices are positions in the list of GPUs this process may use (default: all of them)
  local devices, allowed = self.want_devices, {}
  if devices ~= "cpu" then allowed = M.gpus() end
  if devices == nil and #allowed > 0 then
    devices = {}
    for i = 1, #allowed do devices[i] = i - 1 end
  end
  if devices == nil or devices == "cpu" then devices = { "cpu" } end
  if self.workers_per_gpu == "auto" then
    if devices[1] == "cpu" then
      self.workers_per_gpu, self.workers_how = 1, "auto: 1 in CPU mode"
    else
      local a = M.auto_workers_per_gpu({ gpus = #allowed })
      self.workers_per_gpu, self.workers_how = a.workers, "auto: " .. a.rule
    end
  end
  local fns = {}
  for _, d in ipairs(devices) do
    local n = self.workers_per_gpu
    if n > 1 then self.leases[d] = gpu_lease.new() end
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
    wake(self, "start_waiters")
    return nil, self.start_error, "EWORKER"
  end
  self.workers = workers
  wake(self, "start_waiters")
  return true
end

-- A copy of a worker's gpus() entry for a result (a caller may change what it gets).
local function gpu_record(g)
  return g and { index = g.index, uuid = g.uuid, name = g.name, mig = g.mig, visible = g.visible }
end

--- devices() -> array of {device, mode, gpu, gpu_name, torch, triton, sandbox, job_defaults, baselines, workers, workers_how} | nil, "EWORKER: ...", "EWORKER"
function Pool:devices()
  task._running_task("pool:devices")
  local ok, err = self:_ensure()
  if not ok then return nil, err, "EWORKER" end
  local out, seen = {}, {}
  for _, w in ipairs(self.workers) do
    if not seen[w.device] then
      seen[w.device] = true
      local i = w.info
      out[#out + 1] = { device = w.device, mode = i.mode, gpu = gpu_record(w.gpu),
        gpu_name = i.gpu_name or (w.gpu and w.gpu.name), torch = i.torch, triton = i.triton, sandbox = i.sandbox,
        job_defaults = i.job_defaults, baselines = i.baselines, workers = self.workers_per_gpu, workers_how = self.workers_how }
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

-- A free worker, marked busy; waits while none is free. Least-loaded dispatch: a job not pinned
-- to a device takes a free worker of the device with the fewest running + queued jobs (ties: the
-- lowest device number, the workers being listed in device order), so two jobs sent together to a
-- pool of several workers per GPU go to two GPUs. Jobs that find no free worker wait in one queue
-- for whichever device frees first (they are not bound to a device on arrival), so no device
-- idles while another has jobs waiting; a pinned job waits for its own device.
function Pool:_acquire(device)
  while true do
    local any, best, best_load = false, nil, math.huge
    local loads = {}
    for _, w in ipairs(self.workers) do
      if device == nil or w.device == device then
        any = true
        if not w.busy then
          loads[w.device] = loads[w.device] or self:_load(w.device)
          if loads[w.device] < best_load then best, best_load = w, loads[w.device] end
        end
      end
    end
    if best then
      best.busy = true
      return best
    end
    if not any then return nil, "EBADREQ: no worker for device " .. tostring(device) end
    local me = task.current()
    if device ~= nil then
      self.queued[device] = self.queued[device] or {}
      self.queued[device][me] = true
    end
    park(self, "free_waiters")
    if device ~= nil then self.queued[device][me] = nil end
  end
end

-- Marks a worker free (and gives back its device's lease, if it held it) and wakes the tasks waiting for one (each looks again).
function Pool:_release(w)
  self:_lease_release(w)  -- a request that raised may have left it held
  w.busy = false
  wake(self, "free_waiters")
end

-- Kills a broken worker and starts a new one in its place (same device and slot).
function Pool:_respawn(w, why)
  log.warn("gpu: restarting the worker for device %s: %s", tostring(w.device), why)
  self:_lease_release(w)  -- a dead or hung worker's lease goes to the next in line at once
  -- TERM first: the worker then kills its sandboxes and what they started (KILL follows)
  w.proc:kill("TERM")
  pcall(function() w.proc:wait(5) end)
  pcall(self._drain, self, w, true)
  self.counters.respawns = self.counters.respawns + 1
  local nw, err = self:_spawn(w.device, w.slot, w.gpu)
  if nw then
    for k, v in pairs(nw) do w[k] = v end
  else
    w.dead = true
    log.error("gpu: worker for device %s did not restart: %s", tostring(w.device), tostring(err))
  end
end

-- w.holds: the job's holds of its device's lease, {mode, at (granted, kagent.time.now()), s},
-- reported as result.lease_holds: when each job could run GPU work, on the clock of stage_at
local function close_hold(w)
  local h = w.holds and w.holds[#w.holds]
  if h and not h.s then h.s = ktime.now() - h.at end
end

function Pool:_lease_release(w)
  local l = self.leases[w.device]
  if l then l:release(w) end
  close_hold(w)
end

-- A worker's lease request during a job: "acquire" (mode "shared" or "exclusive", the default)
-- waits for the device's lease and answers "granted"; "release" gives back what it holds.
-- Returns the seconds waited and the mode, or nil, err when the grant cannot be sent.
function Pool:_lease_request(w, msg)
  if msg.lease == "release" then
    self:_lease_release(w)
    return 0
  end
  local mode = msg.mode or gpu_lease.EXCLUSIVE
  if msg.lease ~= "acquire" or (mode ~= gpu_lease.SHARED and mode ~= gpu_lease.EXCLUSIVE) then
    log.warn("gpu: unknown lease request %q (mode %q) from the worker for device %s",
      tostring(msg.lease), tostring(msg.mode), tostring(w.device))
    return 0
  end
  local l = self.leases[w.device]
  local waited = l and l:acquire(w, mode) or 0
  if l then
    close_hold(w)  -- a worker asking for another mode gave the first up (gpu_lease:acquire)
    w.holds[#w.holds + 1] = { mode = mode, at = ktime.now() }
  end
  local ok, err = w.proc:write(json.encode({ lease = "granted", mode = mode }) .. "\n")
  if not ok then return nil, err end
  return waited, mode
end

-- One request/reply with a worker; nil, err when the worker broke (it is respawned). Time spent
-- waiting for the device's lease adds to w.lease_wait (exclusive) or w.shared_wait and not to
-- the wall limit.
function Pool:_request(w, op, job, wall)
  w.lease_wait, w.shared_wait, w.holds = 0, 0, {}
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
    if reply and rerr == true then
      local why = string.format("a reply longer than %d bytes (cut)", M.MAX_REPLY)
      self:_respawn(w, why)
      return nil, "EWORKER: " .. why
    end
    if not reply then
      local why = tostring(rerr):match("^ETIMEDOUT") and
        string.format("no reply in %.0f s (killed)", wall) or "the worker died (" .. tostring(rerr) .. ")"
      self:_respawn(w, why)
      return nil, "EWORKER: " .. why
    end
    local msg = json.decode(reply)
    if type(msg) == "table" and msg.id == id and msg.lease ~= nil then
      local waited, mode = self:_lease_request(w, msg)
      if not waited then
        self:_respawn(w, "write failed: " .. tostring(mode))
        return nil, "EWORKER: the worker died while it waited for the lease (" .. tostring(mode) .. ")"
      end
      if mode == gpu_lease.SHARED then w.shared_wait = w.shared_wait + waited
      else w.lease_wait = w.lease_wait + waited end
      deadline = deadline + waited
    elseif type(msg) == "table" and msg.id == id then
      self:_lease_release(w)  -- the job is over, whatever the worker did with the lease
      self:_drain(w)
      return secrets.redact_tree(strip_nulls(msg))
    else
      log.warn("gpu: unexpected line from the worker: %s", reply:sub(1, 200))
    end
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
  -- which device measured it: the pool's number for it (what job.device pins) and the GPU itself
  -- (nil in CPU mode); the worker's own "cuda:0" names only its one visible GPU
  result.device = w.device
  result.gpu = gpu_record(w.gpu)
  result.wall = ktime.now() - t0
  result.lease_wait_s = w.lease_wait or 0
  result.lease_shared_wait_s = w.shared_wait or 0
  if w.holds and #w.holds > 0 then result.lease_holds = w.holds end
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
return M
