-- kagent.log: spdlog-backed logging, each line tagged with the running task's name. Every line
-- passes through kagent.secrets' redaction first.
local native = require("kagent.native")
local secrets = require("kagent.secrets")

local M = {}
local levels = { "trace", "debug", "info", "warn", "error" }

local function task_name()
  local ok, task = pcall(require, "kagent.task")
  return ok and task.name() or "runtime"
end

for _, level in ipairs(levels) do
  local emit = native.log[level]
  M[level] = function(fmt, ...)
    if not native.log.enabled(level) then return end
    local msg
    if select("#", ...) > 0 then msg = string.format(tostring(fmt), ...) else msg = tostring(fmt) end
    emit(task_name(), secrets.redact(msg))
  end
end

--- The current level name.
M.level = native.log.level
--- Sets the level ("trace"|"debug"|"info"|"warn"|"error"|"off").
M.set_level = native.log.set_level
--- status(text): the status line under the log on stderr (nil or "" erases it); log lines are
--- written above it. Redacted like log lines. Show one only on a terminal.
function M.status(text)
  native.log.status(text and secrets.redact(tostring(text)) or "")
end

return M
