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
---@return any
function log.level() end

---`log.trace/debug/info/warn/error(fmt, ...)` — `string.format` then log, tagged with the task's
---  name. `log.level()` → current level; `log.set_level(name)`.
---@param name string
---@return any
function log.set_level(name) end

return log
