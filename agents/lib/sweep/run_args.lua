-- The runs' own options (agents/lib/options.lua) as a driver of many runs takes them and passes
-- them on: agents/sweep.lua to each run, agents/compare.lua to each policy's sweep. A driver
-- keeps the options it sets itself (the problem, the run folder, the database, ...).
local policy_options = require("agents.lib.options")

local M = {}

-- Set by the driver for each run, never passed through.
M.OWN = { problem = true, kernel = true, out = true, db = true, resume = true, policy = true, devices = true }

-- add(spec) -> the names of the runs' options, added to spec (each one's help says it goes to
-- every run, with the run's own default), sorted
function M.add(spec)
  local names = {}
  for name, s in pairs(policy_options) do
    if not M.OWN[name] and not spec[name] then
      names[#names + 1] = name
      spec[name] = { type = s.type, help = s.help .. (s.default ~= nil and (" (each run; its default " .. tostring(s.default) .. ")")
        or " (each run)") }
    end
  end
  table.sort(names)
  return names
end

-- args(names, opts, extra) -> the runs' options given on this command line, then `extra`
function M.args(names, opts, extra)
  local out = {}
  for _, name in ipairs(names) do
    local v = opts[name:gsub("-", "_")]
    if v ~= nil then
      out[#out + 1] = "--" .. name
      out[#out + 1] = tostring(v)
    end
  end
  for _, a in ipairs(extra or {}) do out[#out + 1] = a end
  return out
end

return M
