-- sorted(t) -> the keys of t in sorted order: one order for what is printed, written or compared
-- from a table whose pairs() order is arbitrary.
local M = {}

function M.sorted(t)
  local out = {}
  for k in pairs(t) do out[#out + 1] = k end
  table.sort(out)
  return out
end

return M
