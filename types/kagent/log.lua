---@meta
-- Generated from docs/lua-api.md by scripts/gen_lua_types.lua: do not edit; run
-- `build/kagent-rt scripts/gen_lua_types.lua` after changing the docs.

---@class kagent.log
local log = {}

---`log.trace/debug/info/warn/error(fmt, ...)` — `string.format` then log, tagged with the task's
---  name. `log.level()` → current level; `log.set_level(name)`.
---@param fmt string
---@param ... any
---@return any
function log.trace(fmt, ...) end

---`log.trace/debug/info/warn/error(fmt, ...)` — `string.format` then log, tagged with the task's
---  name. `log.level()` → current level; `log.set_level(name)`.
---@param fmt string
---@param ... any
---@return any
function log.debug(fmt, ...) end

---`log.trace/debug/info/warn/error(fmt, ...)` — `string.format` then log, tagged with the task's
---  name. `log.level()` → current level; `log.set_level(name)`.
---@param fmt string
---@param ... any
---@return any
function log.info(fmt, ...) end

---`log.trace/debug/info/warn/error(fmt, ...)` — `string.format` then log, tagged with the task's
---  name. `log.level()` → current level; `log.set_level(name)`.
---@param fmt string
---@param ... any
---@return any
function log.warn(fmt, ...) end

---`log.trace/debug/info/warn/error(fmt, ...)` — `string.format` then log, tagged with the task's
---  name. `log.level()` → current level; `log.set_level(name)`.
---@param fmt string
---@param ... any
---@return any
function log.error(fmt, ...) end

---`log.trace/debug/info/warn/error(fmt, ...)` — `string.format` then log, tagged with the task's
---  name. `log.level()` → current level; `log.set_level(name)`.
---@return string
function log.level() end

---`log.trace/debug/info/warn/error(fmt, ...)` — `string.format` then log, tagged with the task's
---  name. `log.level()` → current level; `log.set_level(name)`.
---@param name string
---@return any
function log.set_level(name) end

---`log.status(text)` — shows `text` (one line, redacted) as the status line under the log on
---  stderr; `nil` or `""` erases it. Each log line erases it, is written, and draws it again below,
---  so log lines pass above it. It writes terminal control codes: show one only when stderr is a
---  terminal (fs.isatty of 2); elsewhere print plain lines.
---@param text string
---@return any
function log.status(text) end

return log
