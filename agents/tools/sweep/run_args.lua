-- The runs' own options (agents/run/options.lua) as a driver of many runs takes them and passes
-- them on: agents/sweep.lua to each run, agents/compare.lua to each policy's sweep. A driver
-- keeps the options it sets itself (the problem, the run folder, the database, ...).
local policy_options = require("agents.run.options")

local M = {}

-- Set by the driver for each run, never passed through.
M.OWN = { problem = true, kernel = true, out = true, db = true, resume = true, policy = true, devices = true }

-- add(spec) -> the names of the runs' options, added to spec in their own help group, sorted.
-- Each is checked here as each run would check it, with no default, so that only what the
-- command line gives is passed on.
function M.add(spec)
  local names = {}
  for name, s in pairs(policy_options) do
    if not M.OWN[name] and not spec[name] then
      names[#names + 1] = name
      local own = { group = "Each run's options (defaults: the run's)" }
      for k, v in pairs(s) do if k ~= "default" and k ~= "group" then own[k] = v end end
      spec[name] = own
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
    if type(v) == "table" then  -- a repeated option (--model): each value again
      for _, x in ipairs(v) do out[#out + 1], out[#out + 2] = "--" .. name, tostring(x) end
    elseif v ~= nil then
      out[#out + 1] = "--" .. name
      if v ~= true then out[#out + 1] = tostring(v) end  -- a flag has no value
    end
  end
  for _, a in ipairs(extra or {}) do out[#out + 1] = a end
  return out
end

return M
