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

--- strip_nulls(v) -> v with every json.null inside objects removed (in place, nested), so a
--- decoded field that was null reads as nil; nulls inside arrays stay, so arrays keep their length.
function M.strip_nulls(v)
  if type(v) ~= "table" then return v end
  if M.is_array(v) then
    for i = 1, #v do M.strip_nulls(v[i]) end
    return v
  end
  for k, x in pairs(v) do
    if x == M.null then v[k] = nil else M.strip_nulls(x) end
  end
  return v
end

--- True when t is a table that encodes as a JSON array.
function M.is_array(t)
  return native.json.is_array(t)
end

return M
