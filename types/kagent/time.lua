---@meta
-- Generated from docs/lua-api.md by scripts/gen_lua_types.lua: do not edit; run
-- `build/kagent-rt scripts/gen_lua_types.lua` after changing the docs.

---@class kagent.time
local time = {}

---`time.now()` → monotonic seconds (float). `time.wall()` → Unix time (float).
---@return number
function time.now() end

---`time.now()` → monotonic seconds (float). `time.wall()` → Unix time (float).
---@return number
function time.wall() end

return time
