-- The run's record of its failed writes: the first write to the run folder or the memory database
-- that failed (a full disk, a database locked past its bound: kagent.mem). A run whose record is
-- incomplete is no success: every write reports here, wherever it ran (a worker task included),
-- the driver stops at its next checkpoint, and the run ends with exit status 6 (agents/run/exit.lua),
-- naming the path and the error. The first failure is the one that explains the rest.
local fs = require("kagent.fs")
local log = require("kagent.log")

local M = {}
M.__index = M

function M.new() return setmetatable({ count = 0 }, M) end

-- failed(path, err): records a failed write of `path` (a file, or the database's file)
function M:failed(path, err)
  self.count = self.count + 1
  if self.first then return end
  self.first = { path = tostring(path), error = tostring(err) }
  log.error("cannot write %s: %s (the run stops at its next checkpoint)", self.first.path, self.first.error)
end

-- written(path) -> true where the file is there; else records it as a failed write. The last
-- lines of a run check its final files so (an atomic write that said ok left them there).
function M:written(path)
  if fs.exists(path) then return true end
  self:failed(path, "not there after it was written")
  return false
end

-- line() -> "cannot write <path>: <error>" of the first failure, or nil where every write held
function M:line()
  local f = self.first
  if not f then return nil end
  -- kagent.fs says "EIO: cannot write <path>: <the system's words>": the path is said once
  local e = f.error:gsub("^E%u+: ", "")
  local i, j = e:find(f.path .. ": ", 1, true)
  if i and e:sub(1, i - 1):match("^cannot [%a ]*$") then e = e:sub(j + 1) end
  return string.format("cannot write %s: %s%s", f.path, e,
    self.count > 1 and string.format(" (and %d later write(s) failed)", self.count - 1) or "")
end

-- failure(run) -> the line of the run's first failed write, or nil (none; or a test's fake run
-- without a record)
function M.failure(run)
  local w = run.rd and run.rd.writes
  return w and w.line and w:line() or nil
end

return M
