-- kagent.task, the primitives tasks wait on together: semaphores (a count of slots) and conditions
-- (an event that wakes every task waiting for it). Installed into the task module by
-- kagent/task.lua, which hands over the scheduler's internals they need.
local native = require("kagent.native")

-- M: the task module; s: {running_task, park, wake} of kagent/task.lua
return function(M, s)
  local running_task, park, wake = s.running_task, s.park, s.wake

  -- Semaphores ---------------------------------------------------------------------------------
  local Semaphore = {}
  Semaphore.__index = Semaphore

  function M.semaphore(n)
    if type(n) ~= "number" or n < 0 then error("task.semaphore: expected a count >= 0", 2) end
    return setmetatable({ count = n, waiters = {} }, Semaphore)
  end

  function Semaphore:available() return self.count end

  function Semaphore:acquire(timeout)
    local t = running_task("sem:acquire")
    if self.count > 0 and #self.waiters == 0 then
      self.count = self.count - 1
      return true
    end
    if timeout ~= nil and (type(timeout) ~= "number" or timeout < 0) then
      error("sem:acquire: timeout must be a number >= 0", 2)
    end
    local entry = { task = t, granted = false }
    self.waiters[#self.waiters + 1] = entry
    if timeout then
      local op = native.time.sleep_start(timeout)
      entry.op = op
      M._await(op, "sem:acquire")
    else
      park()
    end
    if entry.granted then return true end
    for i, e in ipairs(self.waiters) do
      if e == entry then table.remove(self.waiters, i) break end
    end
    return nil, "ETIMEDOUT: semaphore not acquired in " .. tostring(timeout) .. " s", "ETIMEDOUT"
  end

  function Semaphore:release()
    while #self.waiters > 0 do
      local e = table.remove(self.waiters, 1)
      if e.task.status ~= "dead" then
        e.granted = true
        wake(e.task, e.op)
        return
      end
    end
    self.count = self.count + 1
  end

  -- Conditions ---------------------------------------------------------------------------------
  -- One object for "wait until something changes" shared by any number of tasks, so a module
  -- need not keep a semaphore per waiting task and release each one.
  local Condition = {}
  Condition.__index = Condition

  function M.condition()
    return setmetatable({ waiters = {} }, Condition)
  end

  --- cond:wait() ⏸ -> true once notify_all() is called after this wait began.
  function Condition:wait()
    local t = running_task("cond:wait")
    self.waiters[#self.waiters + 1] = t
    park()
    return true
  end

  --- cond:notify_all() -> the number of tasks woken: all those waiting now, in the order they
  --- began to wait (a task killed while waiting is passed over). A later wait waits for the next call.
  function Condition:notify_all()
    local waiting = self.waiters
    self.waiters = {}
    local n = 0
    for _, t in ipairs(waiting) do
      if t.status ~= "dead" then
        n = n + 1
        wake(t)
      end
    end
    return n
  end
end
