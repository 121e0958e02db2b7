-- kagent.task: cooperative tasks (coroutines) on the runtime's event loop.
--
-- The scheduler is Lua; C++ only knows operations. A ⏸ primitive starts a native operation,
-- gets its id, and parks the task with task._await(op). C++ delivers the results through
-- task._complete(op, ...), which queues the task; task._run_ready(), called by the loop once per
-- iteration, resumes queued tasks. Tasks are never resumed from inside a native callback.
local native = require("kagent.native")

local M = {}

local now = native.time.now
local cancel_op = native.ops.cancel
local unpack = unpack  -- LuaJIT's (Lua 5.1)
local pack = function(...) return { n = select("#", ...), ... } end

local HOG_WARN = tonumber(os.getenv("KAGENT_HOG_WARN") or "") or 1.0
local PARK = {} -- the value a task yields when it parks
local KILLED = setmetatable({}, { __tostring = function() return "ECANCELED: killed" end })

local Task = {}
Task.__index = Task
Task.__tostring = function(t) return "task<" .. t.name .. ">" end

local by_co = setmetatable({}, { __mode = "k" }) -- coroutine -> task
local live = {}                                   -- task -> true while not dead
local ready = {}                                  -- tasks to resume at the next turn
local parked_on = {}                              -- op id -> task
local main_task = nil
local next_id = 0

-- Scheduler messages are tagged with the task they are about, not the (absent) running task.
local function log_about(t, level, fmt, ...)
  if native.log.enabled(level) then native.log[level](t.name, string.format(fmt, ...)) end
end

local function schedule(t, ...)
  if t.status == "dead" then return end
  t.resume_args = pack(...)
  t.status = "ready"
  ready[#ready + 1] = t
end

local function finish(t, ok, ...)
  t.status = "dead"
  live[t] = nil
  if t.op then
    parked_on[t.op] = nil
    t.op = nil
  end
  if ok then
    t.ok, t.results = true, pack(...)
  else
    t.ok, t.err = false, (...)
  end
  local waiters = t.waiters
  t.waiters = {}
  for _, w in ipairs(waiters) do
    if t.ok then schedule(w, true, unpack(t.results, 1, t.results.n)) else schedule(w, false, t.err) end
  end
  local watchers = t.watchers
  t.watchers = nil
  for _, w in pairs(watchers or {}) do w(t) end
end

--- Spawns fn(...) as a new task. `fn` may be a table {fn=, name=}.
function M.spawn(fn, ...)
  local name
  if type(fn) == "table" then
    name = fn.name
    fn = fn.fn or fn[1]
  end
  if type(fn) ~= "function" then error("task.spawn: expected a function, got " .. type(fn), 2) end
  next_id = next_id + 1
  local t = setmetatable({
    id = next_id,
    name = name or ("task" .. next_id),
    status = "ready",
    waiters = {},
  }, Task)
  t.co = coroutine.create(fn)
  by_co[t.co] = t
  live[t] = true
  schedule(t, ...)
  return t
end

--- The running task, or nil outside any task.
function M.current()
  local co = coroutine.running()
  return co and by_co[co] or nil
end

function M.name()
  local t = M.current()
  return t and t.name or "runtime"
end

local function running_task(fname)
  local co = coroutine.running()
  local t = co and by_co[co]
  if not t then
    error(fname .. ": must be called inside a task (not from the top level or a plain coroutine)", 3)
  end
  return t
end
M._running_task = running_task

local function park()
  local r = pack(coroutine.yield(PARK))
  return unpack(r, 1, r.n)
end

--- Parks the running task until native operation `op` completes; returns its results.
function M._await(op, fname)
  local t = running_task(fname or "await")
  t.op = op
  parked_on[op] = t
  return park()
end

--- Called by C++ when operation `op` completes.
function M._complete(op, ...)
  local t = parked_on[op]
  if not t then return end
  parked_on[op] = nil
  t.op = nil
  schedule(t, ...)
end

function M.sleep(s)
  if type(s) ~= "number" or s < 0 then error("task.sleep: expected a number >= 0", 2) end
  running_task("task.sleep")
  return M._await(native.time.sleep_start(s), "task.sleep")
end

function M.yield()
  local t = running_task("task.yield")
  schedule(t)
  return park()
end

function M.wait(t)
  if getmetatable(t) ~= Task then error("task.wait: expected a task", 2) end
  local me = running_task("task.wait")
  if me == t then error("task.wait: a task cannot wait for itself", 2) end
  if t.status == "dead" then
    if t.ok then return true, unpack(t.results, 1, t.results.n) end
    return false, t.err
  end
  t.waiters[#t.waiters + 1] = me
  return park()
end

--- any(list) ⏸ -> i, ok, results... (or i, false, err) of the first of the tasks in `list` to
--- finish; one that has already finished counts at once (the lowest index first).
function M.any(list)
  if type(list) ~= "table" or #list == 0 then error("task.any: expected a non-empty list of tasks", 2) end
  for i, t in ipairs(list) do
    if getmetatable(t) ~= Task then error("task.any: item " .. i .. " is not a task", 2) end
  end
  local me = running_task("task.any")
  for i, t in ipairs(list) do
    if t == me then error("task.any: a task cannot wait for itself", 2) end
    if t.status == "dead" then
      if t.ok then return i, true, unpack(t.results, 1, t.results.n) end
      return i, false, t.err
    end
  end
  -- one watcher per task; the first to fire wakes this task, and every watcher goes when it wakes
  -- (or is killed), so a later finish cannot schedule it a second time
  local key, first = {}, nil
  local function unwatch()
    for _, t in ipairs(list) do if t.watchers then t.watchers[key] = nil end end
  end
  for i, t in ipairs(list) do
    t.watchers = t.watchers or {}
    t.watchers[key] = function()
      if first then return end
      first = i
      unwatch()
      if t.ok then schedule(me, i, true, unpack(t.results, 1, t.results.n)) else schedule(me, i, false, t.err) end
    end
  end
  local prev = me.on_kill
  me.on_kill = function() unwatch(); if prev then prev() end end
  local r = pack(park())
  me.on_kill = prev
  return unpack(r, 1, r.n)
end

function M.kill(t)
  if getmetatable(t) ~= Task then error("task.kill: expected a task", 2) end
  if t.status == "dead" then return false end
  if t == M.current() then error(KILLED, 0) end
  if t.op then
    local op = t.op
    parked_on[op] = nil
    t.op = nil
    cancel_op(op)
  end
  if t.on_kill then
    local hook = t.on_kill
    t.on_kill = nil
    pcall(hook)
  end
  finish(t, false, "ECANCELED: killed")
  return true
end

--- Runs functions as tasks (or waits tasks); returns results in input order.
function M.all(list, opts)
  if type(list) ~= "table" then error("task.all: expected a list", 2) end
  running_task("task.all")
  local limit = opts and opts.limit or math.huge
  if type(limit) ~= "number" or limit < 1 then error("task.all: limit must be >= 1", 2) end
  local n = #list
  local out = {}
  local tasks = {}
  local fn_idx = {}
  for i = 1, n do
    local item = list[i]
    if getmetatable(item) == Task then
      tasks[i] = item
    elseif type(item) == "function" then
      fn_idx[#fn_idx + 1] = i
    else
      error("task.all: item " .. i .. " is neither a function nor a task", 2)
    end
  end
  -- Functions run on at most `limit` runner tasks that take the next index in turn.
  local next_fn = 1
  local function runner()
    while next_fn <= #fn_idx do
      local i = fn_idx[next_fn]
      next_fn = next_fn + 1
      local r = pack(pcall(list[i]))
      if r[1] then
        out[i] = { ok = true, unpack(r, 2, r.n) }
      else
        out[i] = { ok = false, r[2] }
      end
    end
  end
  local runners = {}
  for k = 1, math.min(limit, #fn_idx) do
    runners[k] = M.spawn({ fn = runner, name = M.name() .. ".all" .. k })
  end
  for _, r in ipairs(runners) do
    local ok, err = M.wait(r)
    if not ok then error(err, 0) end
  end
  for i = 1, n do
    if tasks[i] then
      local r = pack(M.wait(tasks[i]))
      if r[1] then out[i] = { ok = true, unpack(r, 2, r.n) } else out[i] = { ok = false, r[2] } end
    end
  end
  return out
end

-- Semaphores and conditions (kagent/task/sync.lua) -------------------------------------------

-- Wakes a task parked by a primitive of kagent/task/sync.lua; `op` is the timer it also waits on
-- (a wait with a timeout), canceled so it cannot wake the task a second time.
local function wake(t, op)
  if op then
    parked_on[op] = nil
    t.op = nil
    cancel_op(op)
  end
  schedule(t)
end

require("kagent.task.sync")(M, { running_task = running_task, park = park, wake = wake })

-- Driven by the C++ loop --------------------------------------------------------------------------
function M._start_main(path)
  -- a relative script that is not a file here is looked up on kagent.path (kagent/init.lua)
  local kagent = require("kagent")
  local found, why = require("kagent.search_path").script(kagent.path, path)
  if not found then return false, why end
  local chunk, err = loadfile(found)
  if not chunk then return false, err end
  local info = native.info
  main_task = M.spawn({ fn = chunk, name = "main" }, unpack(info.args))
  return true
end

local function resume(t)
  t.status = "running"
  local args = t.resume_args
  t.resume_args = nil
  local t0 = now()
  local r = pack(coroutine.resume(t.co, unpack(args, 1, args.n)))
  local dt = now() - t0
  if dt > HOG_WARN then
    log_about(t, "warn", "ran %.2f s without yielding (every other task waited)", dt)
  end
  if t.status == "dead" then return end -- killed itself via kill(other) side effects
  if coroutine.status(t.co) == "dead" then
    if r[1] then
      finish(t, true, unpack(r, 2, r.n))
    else
      local err = r[2]
      local msg
      if err == KILLED then
        msg = "ECANCELED: killed"
      elseif type(err) == "table" and t ~= main_task then
        msg = err -- error objects reach waiters unchanged
      else
        msg = debug.traceback(t.co, tostring(err))
      end
      finish(t, false, msg)
      if t ~= main_task and err ~= KILLED and type(err) ~= "table" then
        log_about(t, "error", "task failed: %s", msg)
      end
    end
  elseif r[2] ~= PARK then
    -- A bare coroutine.yield() inside a task: treat it as task.yield().
    schedule(t)
  elseif t.status == "running" then
    -- (task.yield() scheduled itself before parking: it stays "ready".)
    t.status = "parked"
  end
end

function M._run_ready()
  local batch = ready
  ready = {}
  for _, t in ipairs(batch) do
    if t.status == "ready" then resume(t) end
    if main_task.status == "dead" then break end
  end
  if main_task.status == "dead" then
    if not main_task.ok then return "error", main_task.err end
    local first = main_task.results[1]
    if type(first) == "number" and first == math.floor(first) then return "done", first end
    if first == false then return "done", 1 end
    return "done", 0
  end
  return "running", #ready > 0
end

function M._shutdown()
  for t in pairs(live) do
    if t ~= main_task then M.kill(t) end
  end
end

return M
