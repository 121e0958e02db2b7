---@meta
-- Generated from docs/lua-api.md by scripts/gen_lua_types.lua: do not edit; run
-- `build/kagent-rt scripts/gen_lua_types.lua` after changing the docs.

---@class kagent.json
local json = {}

---`json.encode(v, {pretty=bool})` → string. Tables with keys `1..n` are arrays, others
---  objects (keys must be strings or numbers; object keys are written sorted). An empty table is `{}`; use `json.empty_array` for `[]`.
---  Integral numbers are written without a fraction. Raises on cycles, functions, NaN/Inf.
---@type any
json.empty_array = nil

---`json.decode(s)` → value or `nil, "EPARSE: <message naming line and column>", "EPARSE"`. JSON `null` becomes
---  `json.null` (inside arrays and objects) so arrays keep their length; decoded arrays keep their
---  array-ness when encoded again (also when empty).
---@type any
json.null = nil

---`json.encode(v, {pretty=bool})` → string. Tables with keys `1..n` are arrays, others
---  objects (keys must be strings or numbers; object keys are written sorted). An empty table is `{}`; use `json.empty_array` for `[]`.
---  Integral numbers are written without a fraction. Raises on cycles, functions, NaN/Inf.
---@param v any
---@param opts? table
---@return string
function json.encode(v, opts) end

---`json.decode(s)` → value or `nil, "EPARSE: <message naming line and column>", "EPARSE"`. JSON `null` becomes
---  `json.null` (inside arrays and objects) so arrays keep their length; decoded arrays keep their
---  array-ness when encoded again (also when empty).
---@param s any
---@return any, string?, string?
function json.decode(s) end

---`json.null`, `json.empty_array` — sentinels. `json.is_array(t)` → boolean.
---@param t kagent.task.Task
---@return boolean
function json.is_array(t) end

---`json.strip_nulls(v)` → `v`, with every `json.null` inside objects removed, nested, in place (a
---  field that was `null` then reads as `nil`); nulls inside arrays stay, so arrays keep their length.
---@param v any
---@return any
function json.strip_nulls(v) end

return json
