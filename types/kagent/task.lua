---@meta
-- Generated from docs/lua-api.md by scripts/gen_lua_types.lua: do not edit; run
-- `build/kagent-rt scripts/gen_lua_types.lua` after changing the docs.

---@class kagent.task
local task = {}

---`task.spawn(fn, ...)` → `t`. Runs `fn(...)` as a new task (starts at the next scheduler turn).
---  `t.name` may be set (used in logs); `task.spawn{fn=fn, name="w1"}, ...` is also accepted.
---@param fn function
---@param ... any
---@return kagent.task.Task
function task.spawn(fn, ...) end

---`task.wait(t)` ⏸ → `true, results...` or `false, err` (err carries the traceback text). Waiting
---  for a finished task returns at once; several tasks may wait for one.
---@param t kagent.task.Task
---@return boolean, any
function task.wait(t) end

---`task.any(list)` ⏸ → `i, true, results...` or `i, false, err`: the first of the tasks in `list`
---  (a non-empty array of tasks) to finish, by its index. One that has already finished counts at
---  once (the lowest index first). The others keep running; a later `task.any` over the rest waits
---  for the next, so a loop of them takes the tasks in the order they finish.
---@param list table
---@return any
function task.any(list) end

---`task.all(list, {limit=n})` ⏸ → array in input order of `{ok=true, r1, r2, ...}` or
---  `{ok=false, err}`. Items are functions (run as tasks, at most `limit` at once; default no limit)
---  or tasks (waited).
---@param list table
---@param opts? table
---@return table[]
function task.all(list, opts) end

---`task.sleep(s)` ⏸ → `true`. `s >= 0`.
---@param s any
---@return any
function task.sleep(s) end

---`task.yield()` ⏸ lets other ready tasks run.
---@return any
function task.yield() end

---`task.semaphore(n)` → `sem`; `sem:acquire(timeout)` ⏸ → `true` or `nil, "ETIMEDOUT: ...",
---  "ETIMEDOUT"`; `sem:release()`; `sem:available()` → count.
---@param n any
---@return kagent.task.Semaphore
function task.semaphore(n) end

---`task.condition()` → `cond`, an event any number of tasks wait for together. `cond:wait()` ⏸ →
---  `true` once `cond:notify_all()` is called after the wait began; `cond:notify_all()` → the number
---  of tasks woken: every task waiting now, in the order they began (a task killed while waiting is
---  passed over). A wait that begins later waits for the next `notify_all`.
---@return kagent.task.Condition
function task.condition() end

---`task.kill(t)` → `true` if it was alive. The task ends at once; its pending operation is canceled
---  (timer removed, HTTP transfer aborted, child process group killed). Waiters get
---  `false, "ECANCELED: killed"`.
---@param t kagent.task.Task
---@return boolean
function task.kill(t) end

---`task.current()` → the running task or `nil`; `task.name()` → its name.
---@return kagent.task.Task?
function task.current() end

---`task.current()` → the running task or `nil`; `task.name()` → its name.
---@return string?
function task.name() end

---@class kagent.task.Task
---@field name string? `task.spawn(fn, ...)` → `t`. Runs `fn(...)` as a new task (starts at the next scheduler turn).
local t = {}

---@class kagent.task.Semaphore
local sem = {}

---`task.semaphore(n)` → `sem`; `sem:acquire(timeout)` ⏸ → `true` or `nil, "ETIMEDOUT: ...",
---  "ETIMEDOUT"`; `sem:release()`; `sem:available()` → count.
---@param timeout? number
---@return boolean?, string?, string?
function sem:acquire(timeout) end

---`task.semaphore(n)` → `sem`; `sem:acquire(timeout)` ⏸ → `true` or `nil, "ETIMEDOUT: ...",
---  "ETIMEDOUT"`; `sem:release()`; `sem:available()` → count.
---@return any
function sem:release() end

---`task.semaphore(n)` → `sem`; `sem:acquire(timeout)` ⏸ → `true` or `nil, "ETIMEDOUT: ...",
---  "ETIMEDOUT"`; `sem:release()`; `sem:available()` → count.
---@return integer
function sem:available() end

---@class kagent.task.Condition
local cond = {}

---`task.condition()` → `cond`, an event any number of tasks wait for together. `cond:wait()` ⏸ →
---  `true` once `cond:notify_all()` is called after the wait began; `cond:notify_all()` → the number
---  of tasks woken: every task waiting now, in the order they began (a task killed while waiting is
---  passed over). A wait that begins later waits for the next `notify_all`.
---@return true
function cond:wait() end

---`task.condition()` → `cond`, an event any number of tasks wait for together. `cond:wait()` ⏸ →
---  `true` once `cond:notify_all()` is called after the wait began; `cond:notify_all()` → the number
---  of tasks woken: every task waiting now, in the order they began (a task killed while waiting is
---  passed over). A wait that begins later waits for the next `notify_all`.
---@return integer
function cond:notify_all() end

return task
