-- kagent.json: JSON through nlohmann::json, with sentinels for null and empty arrays.
local native = require("kagent.native")

local M = {}

M.null = native.json.null
M.empty_array = native.json.empty_array

--- encode(v, {pretty=bool, sort_keys=bool}) -> string; raises on values JSON cannot hold.
function M.encode(v, opts)
  local pretty = opts and opts.pretty or false
  return native.json.encode(v, pretty)
end

--- decode(s) -> value, or nil, "EPARSE: ...", "EPARSE".
function M.decode(s)
  if type(s) ~= "string" then error("json.decode: expected a string, got " .. type(s), 2) end
  return native.json.decode(s)
end

--- True when t is a table that encodes as a JSON array.
function M.is_array(t)
  return native.json.is_array(t)
end

return M
