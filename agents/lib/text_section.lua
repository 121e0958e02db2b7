-- A titled list closing a text table (a sweep's table.md, bench.lua's table): a blank line, the
-- title, then its lines, or nothing at all when there are none. One function for every table
-- that ends this way (agents/tools/sweep/figures.lua, fuse_rows.lua, agents/tools/bench/output.lua).
local M = {}

-- append(out, title, lines) -> out, with the section added after its lines when lines is not empty
function M.append(out, title, lines)
  if #lines == 0 then return out end
  out[#out + 1] = ""
  out[#out + 1] = title
  for _, l in ipairs(lines) do out[#out + 1] = l end
  return out
end

return M
