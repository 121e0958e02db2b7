-- Plain statistics over a list of numbers, for the tables of sweeps and fused programs
-- (agents/tools/sweep/figures.lua, fuse_rows.lua): median, geometric and arithmetic mean.
local json = require("kagent.json")

local M = {}

local function sorted(xs)
  local c = {}
  for i, x in ipairs(xs) do c[i] = x end
  table.sort(c)
  return c
end

function M.median(xs)
  local s, n = sorted(xs), #xs
  if n == 0 then return nil end
  if n % 2 == 1 then return s[(n + 1) / 2] end
  return (s[n / 2] + s[n / 2 + 1]) / 2
end

function M.geomean(xs)
  if #xs == 0 then return nil end
  local acc = 0
  for _, x in ipairs(xs) do acc = acc + math.log(x) end
  return math.exp(acc / #xs)
end

function M.mean(xs)
  if #xs == 0 then return nil end
  local acc = 0
  for _, x in ipairs(xs) do acc = acc + x end
  return acc / #xs
end

-- stats(xs) -> {n, geomean, mean, min, median, max} (only n when xs is empty)
function M.stats(xs)
  local s = sorted(xs)
  return { n = #xs, geomean = M.geomean(xs) or json.null, mean = M.mean(xs) or json.null,
    min = s[1] or json.null, median = M.median(xs) or json.null, max = s[#s] or json.null }
end

return M
