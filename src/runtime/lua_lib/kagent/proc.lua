-- kagent.proc: child processes (own process group, pipes, timeouts), shaped like vim.system.
local native = require("kagent.native")
local task = require("kagent.task")

local P = native.proc
local M = {}

local Proc = {}
Proc.__index = Proc

local function check_argv(argv, fname)
  if type(argv) ~= "table" or #argv == 0 then error(fname .. ": argv must be a non-empty array of strings", 3) end
  for i, a in ipairs(argv) do
    if type(a) ~= "string" then error(fname .. ": argv[" .. i .. "] is not a string", 3) end
  end
end

--- spawn(argv, opts) -> p | nil, "ESPAWN: ...", "ESPAWN"
function M.spawn(argv, opts)
  check_argv(argv, "proc.spawn")
  if opts ~= nil and type(opts) ~= "table" then error("proc.spawn: opts must be a table", 2) end
  local h, err, code = P.spawn(argv, opts)
  if not h then return nil, err, code end
  return setmetatable({ _h = h, pid = P.pid(h), argv = argv }, Proc)
end

function Proc:running() return P.running(self._h) end

function Proc:write(s)
  if type(s) ~= "string" then error("p:write: expected a string", 2) end
  task._running_task("p:write")
  return task._await(P.write_start(self._h, s), "p:write")
end

function Proc:close_stdin() P.close_stdin(self._h) end

--- read_line(timeout) -> line, cut | nil, "ETIMEDOUT: ..." | nil, "EOF: ..."; cut is true for a
--- line over max_line, of which this is the head (the rest was dropped).
function Proc:read_line(timeout)
  task._running_task("p:read_line")
  local line, more = P.try_read_line(self._h)
  if line then return line, more end
  local eof = more
  if eof then return nil, "EOF: end of output", "EOF" end
  return task._await(P.read_line_start(self._h, timeout), "p:read_line")
end

--- wait(timeout) -> {code, signal, stdout, stderr, timed_out, elapsed, ...}
function Proc:wait(timeout)
  task._running_task("p:wait")
  return task._await(P.wait_start(self._h, timeout), "p:wait")
end

--- take_stderr() -> text, dropped: stderr received since the last call (it is not returned again
--- by wait), and the bytes dropped over max_output since then.
function Proc:take_stderr() return P.take_stderr(self._h) end

local signals = { TERM = 15, KILL = 9, INT = 2, HUP = 1, USR1 = 10, USR2 = 12, STOP = 19, CONT = 18 }

--- kill(sig) signals the process group; TERM (default) is followed by KILL after kill_grace.
function Proc:kill(sig)
  if type(sig) == "string" then sig = signals[sig:upper():gsub("^SIG", "")] end
  P.kill(self._h, sig or 15)
end

--- environ() -> {NAME = value}: the runtime's environment, .env values included.
function M.environ() return P.environ() end

--- run(argv, opts) -> wait table | nil, err, code
function M.run(argv, opts)
  check_argv(argv, "proc.run")
  task._running_task("proc.run")
  local p, err, code = M.spawn(argv, opts)
  if not p then return nil, err, code end
  return p:wait(opts and opts.timeout)
end

return M
