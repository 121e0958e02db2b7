-- kagent.gpu.lease: the lease of one device shared by several evaluator workers (kagent.gpu's
-- pool), a reader/writer lock held by workers:
--   shared     untimed GPU work (the correctness trials, the first call that compiles, the
--              reference's outputs): any number of holders at once;
--   exclusive  a timed or profiled phase: granted only when nobody else holds the lease.
-- Requests are served in the order they came; a shared request waits behind an earlier
-- exclusive one even while others hold shared, so a stream of untimed work cannot starve a
-- timing, and consecutive shared requests are granted together. A holder is a key (the pool's
-- worker): release(key) gives back whatever it holds, so a dead or hung worker's hold ends
-- whatever its mode; a waiting task that is killed is passed over.
local task = require("kagent.task")
local ktime = require("kagent.time")

local M = {}

local Lease = {}
Lease.__index = Lease

M.SHARED, M.EXCLUSIVE = "shared", "exclusive"

function M.new()
  -- holders: key -> mode; queue: {key, mode, task, sem} in arrival order
  return setmetatable({ holders = {}, shared = 0, exclusive = false, queue = {} }, Lease)
end

local function free_for(self, mode)
  if mode == M.SHARED then return not self.exclusive end
  return not self.exclusive and self.shared == 0
end

local function take(self, key, mode)
  self.holders[key] = mode
  if mode == M.SHARED then self.shared = self.shared + 1 else self.exclusive = true end
end

-- Grants the requests at the head of the queue that can run now.
local function grant(self)
  while #self.queue > 0 do
    local e = self.queue[1]
    if e.task.status == "dead" then
      table.remove(self.queue, 1)
    elseif free_for(self, e.mode) then
      table.remove(self.queue, 1)
      take(self, e.key, e.mode)
      e.sem:release()
    else
      return
    end
  end
end

--- acquire(key, mode) ⏸ -> seconds waited. A key holding exclusive that asks for shared keeps
--- the lease, shared, at once (its timed work is over; the exclusive requests queued meanwhile
--- wait for it as for any shared holder). A key holding shared that asks for exclusive gives it
--- back first and waits in line (no upgrade in place: it must have stopped its GPU work).
function Lease:acquire(key, mode)
  if mode ~= M.SHARED and mode ~= M.EXCLUSIVE then
    error("gpu.lease: mode must be \"shared\" or \"exclusive\", not " .. tostring(mode), 2)
  end
  if self.holders[key] == mode then return 0 end
  if self.holders[key] == M.EXCLUSIVE then  -- downgrade in place
    self.holders[key], self.exclusive, self.shared = M.SHARED, false, self.shared + 1
    grant(self)
    return 0
  end
  self:release(key)
  grant(self)  -- drops waiters killed since the last change
  if #self.queue == 0 and free_for(self, mode) then
    take(self, key, mode)
    return 0
  end
  local t0 = ktime.now()
  local e = { key = key, mode = mode, task = task._running_task("gpu.lease:acquire"), sem = task.semaphore(0) }
  self.queue[#self.queue + 1] = e
  e.sem:acquire()
  return ktime.now() - t0
end

--- release(key): gives back what key holds (nothing if it holds nothing).
function Lease:release(key)
  local mode = self.holders[key]
  if not mode then return end
  self.holders[key] = nil
  if mode == M.SHARED then self.shared = self.shared - 1 else self.exclusive = false end
  grant(self)
end

--- mode_of(key) -> "shared", "exclusive" or nil
function Lease:mode_of(key) return self.holders[key] end

return M
