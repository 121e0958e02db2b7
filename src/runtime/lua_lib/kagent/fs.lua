-- kagent.fs: files and folders (atomic writes), plus path helpers in plain Lua.
local native = require("kagent.native")

local M = {}

M.read = native.fs.read
M.write = native.fs.write
M.append = native.fs.append
M.mkdir_p = native.fs.mkdir_p
M.list = native.fs.list
M.exists = native.fs.exists
M.is_dir = native.fs.is_dir
M.remove = native.fs.remove
M.abspath = native.fs.abspath
--- isatty(fd) -> true when file descriptor fd (0 stdin, 1 stdout, 2 stderr) is a terminal.
M.isatty = native.fs.isatty
--- term_columns(fd) -> the width in columns of the terminal on fd (TIOCGWINSZ), or nil when fd is
--- no terminal or one of unknown size. Read afresh at each call: it follows a resize.
M.term_columns = native.fs.term_columns
--- resizes() -> how many times the terminal was resized (SIGWINCHs read by the runtime) so far.
M.resizes = native.fs.resizes
--- wait_resize([seen]) -> the new resizes() count: at once when more than `seen` resizes came,
--- else it parks the running task until the next one (SIGWINCH, read on the runtime's loop), so a
--- status line is redrawn at once at the new width. Every waiting task wakes; killing one takes
--- its wait back. Pass the count a loop last saw, so a resize between two waits is not missed.
--- Only inside a task.
function M.wait_resize(seen)
  local task = require("kagent.task")
  task._running_task("fs.wait_resize")
  local now = native.fs.resizes()
  if seen and now > seen then return now end
  return task._await(native.fs.resize_start(), "fs.wait_resize")
end
--- lock(path) -> handle | nil, "CODE: message", "CODE"[, holder pid]: an exclusive advisory lock
--- (flock) on the file at path (made if missing), held until handle:unlock(), the handle is
--- collected, or the process ends (kill -9 included). The file then holds this process's pid; a
--- lock held elsewhere (another process, or another handle of this one) is EBUSY with the pid.
M.lock = native.fs.lock

--- Joins path parts with "/", dropping empty parts; an absolute part restarts the path.
function M.join(...)
  local out = ""
  for i = 1, select("#", ...) do
    local p = select(i, ...)
    if type(p) ~= "string" then error("fs.join: part " .. i .. " is not a string", 2) end
    if p ~= "" then
      if p:sub(1, 1) == "/" or out == "" then
        out = p
      else
        out = out:gsub("/+$", "") .. "/" .. p
      end
    end
  end
  return out
end

function M.dirname(p)
  local d = p:match("^(.*)/[^/]*$")
  if d == nil then return "." end
  if d == "" then return "/" end
  return d
end

function M.basename(p)
  return p:match("([^/]*)/*$")
end

return M
