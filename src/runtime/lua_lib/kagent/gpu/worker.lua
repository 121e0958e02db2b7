-- kagent.gpu, one worker: a `python3 -m kagent_eval.worker` process spoken to with JSON lines.
-- Starting it (its environment, its ready line), one request and its reply (with the lease
-- requests a worker sharing its device makes meanwhile), and restarting a worker that broke.
-- Installed into the pool's methods by kagent/gpu/pool.lua.
--
-- Secrets stay in kagent-rt: a worker starts with the allowed part of the environment only, and
-- everything it sends back (replies, stderr) passes through kagent.secrets' redaction on arrival.
local proc = require("kagent.proc")
local json = require("kagent.json")
local log = require("kagent.log")
local ktime = require("kagent.time")
local secrets = require("kagent.secrets")
local lease = require("kagent.gpu.lease")
local worker_log = require("kagent.gpu.worker_log")

local M = {}

-- a worker's reply (one line of its stdout, which candidates never reach: their prints go to
-- stderr) and each stream's unread buffer: 4 MiB
M.MAX_REPLY = 4 * 1048576

-- json.null inside objects becomes nil, so `if r.error then` means what it says
local strip_nulls = json.strip_nulls

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

-- Reads a worker's ready line (msg: its JSON, ready = true) into w.info -> nil, or the error that
-- refuses the worker. The one place that reads the line: a field added to it is read here.
local function read_ready(w, msg, python)
  local verr = version_error(msg, python)
  if verr then return verr end
  w.info = secrets.redact_tree(strip_nulls(msg))
  if w.info.sandbox and #(w.info.sandbox.missing or {}) > 0 then
    log.warn("gpu: the sandbox of the worker for device %s lacks: %s", tostring(w.device),
      table.concat(w.info.sandbox.missing, "; "))
  end
  return nil
end

-- w.holds: the job's holds of its device's lease, {mode, at (granted, kagent.time.now()), s},
-- reported as result.lease_holds: when each job could run GPU work, on the clock of stage_at
local function close_hold(w)
  local h = w.holds and w.holds[#w.holds]
  if h and not h.s then h.s = ktime.now() - h.at end
end

function M.install(Pool)
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
        local refused = read_ready(w, msg, self.python)
        if refused then
          p:kill("KILL")
          p:wait(5)
          return nil, refused
        end
        worker_log.drain(w)
        return w
      end
      log.warn("gpu: ignoring a line from the worker before it was ready: %s", line:sub(1, 200))
    end
  end

  -- Kills a broken worker and starts a new one in its place (same device and slot).
  function Pool:_respawn(w, why)
    log.warn("gpu: restarting the worker for device %s: %s", tostring(w.device), why)
    self:_lease_release(w)  -- a dead or hung worker's lease goes to the next in line at once
    -- TERM first: the worker then kills its sandboxes and what they started (KILL follows)
    w.proc:kill("TERM")
    pcall(function() w.proc:wait(5) end)
    pcall(worker_log.drain, w, true)
    self.counters.respawns = self.counters.respawns + 1
    local nw, err = self:_spawn(w.device, w.slot, w.gpu)
    if nw then
      for k, v in pairs(nw) do w[k] = v end
    else
      w.dead = true
      log.error("gpu: worker for device %s did not restart: %s", tostring(w.device), tostring(err))
    end
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
    local mode = msg.mode or lease.EXCLUSIVE
    if msg.lease ~= "acquire" or (mode ~= lease.SHARED and mode ~= lease.EXCLUSIVE) then
      log.warn("gpu: unknown lease request %q (mode %q) from the worker for device %s",
        tostring(msg.lease), tostring(msg.mode), tostring(w.device))
      return 0
    end
    local l = self.leases[w.device]
    local waited = l and l:acquire(w, mode) or 0
    if l then
      close_hold(w)  -- a worker asking for another mode gave the first up (kagent.gpu.lease's acquire)
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
        if mode == lease.SHARED then w.shared_wait = w.shared_wait + waited
        else w.lease_wait = w.lease_wait + waited end
        deadline = deadline + waited
      elseif type(msg) == "table" and msg.id == id then
        self:_lease_release(w)  -- the job is over, whatever the worker did with the lease
        worker_log.drain(w)
        return secrets.redact_tree(strip_nulls(msg))
      else
        log.warn("gpu: unexpected line from the worker: %s", reply:sub(1, 200))
      end
    end
  end
end

return M
