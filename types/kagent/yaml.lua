---@meta
-- Generated from docs/lua-api.md by scripts/gen_lua_types.lua: do not edit; run
-- `build/kagent-rt scripts/gen_lua_types.lua` after changing the docs.

---@class kagent.yaml
local yaml = {}

---`yaml.decode(s)` → value or `nil, "EPARSE: LINE:COL: <message>", "EPARSE"` (1-based line and
---  column). One document (the first); a text of only comments is `yaml.null`. Plain scalars are
---  typed by YAML 1.2's core schema: `null`, `~` or nothing → `yaml.null`; `true`/`false` (also
---  `True`, `TRUE`...) → booleans; integers (`12`, `-3`, `0o17`, `0x1F`) and floats (`1.5`, `1e-3`,
---  `.inf`, `.nan`) → numbers (Lua numbers are doubles: integers beyond 2^53 lose digits); anything
---  else, and every quoted scalar or `!!str`, → a string. Mappings → tables with string keys (a key
---  given twice is an error at its line); sequences → arrays that `json.is_array` knows, also when
---  empty, so a decoded value encodes as JSON unchanged. Anchors and aliases are resolved.
---@type any
yaml.null = nil

---`yaml.decode(s)` → value or `nil, "EPARSE: LINE:COL: <message>", "EPARSE"` (1-based line and
---  column). One document (the first); a text of only comments is `yaml.null`. Plain scalars are
---  typed by YAML 1.2's core schema: `null`, `~` or nothing → `yaml.null`; `true`/`false` (also
---  `True`, `TRUE`...) → booleans; integers (`12`, `-3`, `0o17`, `0x1F`) and floats (`1.5`, `1e-3`,
---  `.inf`, `.nan`) → numbers (Lua numbers are doubles: integers beyond 2^53 lose digits); anything
---  else, and every quoted scalar or `!!str`, → a string. Mappings → tables with string keys (a key
---  given twice is an error at its line); sequences → arrays that `json.is_array` knows, also when
---  empty, so a decoded value encodes as JSON unchanged. Anchors and aliases are resolved.
---@param s any
---@return any
function yaml.decode(s) end

return yaml
