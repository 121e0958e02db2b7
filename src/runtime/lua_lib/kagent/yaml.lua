-- kagent.yaml: YAML text -> Lua values through yaml-cpp (docs/lua-api.md, kagent.yaml).
local native = require("kagent.native")
local json = require("kagent.json")

local M = {}

-- The same sentinel as kagent.json's, so a decoded YAML value encodes as JSON unchanged.
M.null = json.null
local ARRAY_META = getmetatable(json.empty_array)

--- decode(s) -> value, or nil, "EPARSE: LINE:COL: what", "EPARSE". One document; plain scalars
--- typed by YAML 1.2's core schema; sequences are kagent.json arrays (json.is_array holds).
function M.decode(s)
  if type(s) ~= "string" then error("yaml.decode: expected a string, got " .. type(s), 2) end
  return native.yaml.decode(s, ARRAY_META)
end

return M
