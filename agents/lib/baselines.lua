-- The baselines kernels are timed against. The evaluator states them once
-- (src/gpu/eval/kagent_eval/job_defaults.py): its ready line carries `baselines` (every baseline
-- it can time, in order) and `reported_baselines` (those every reported kernel is timed against,
-- in the same job), which pool:devices() gives and a run keeps in run.devices. Where no pool
-- exists (report pages drawn from saved runs), the names come from the saved records.
local M = {}

-- The one Lua statement of the names, a fallback only: for an evaluator whose ready line states
-- none (a worker older than the field, a test's fake pool) and for saved records that name none.
-- tests/lua/gpu_spec.lua checks it agrees with the worker's `reported_baselines`.
M.FALLBACK = { "eager", "compile" }

local function stated(run, field)
  local d = type(run) == "table" and type(run.devices) == "table" and run.devices[1]
  local names = type(d) == "table" and d[field]
  return type(names) == "table" and #names > 0 and names or nil
end

-- all(run) -> every baseline the run's evaluator times (the final confirmation's, the cache's)
function M.all(run)
  return stated(run, "baselines") or M.FALLBACK
end

-- reported(run) -> the baselines every reported kernel of the run is timed against
function M.reported(run)
  return stated(run, "reported_baselines") or M.FALLBACK
end

-- saved(...) -> the baseline names that saved tables are keyed by, in the fallback's order and
-- then by name (the fallback when they name none): each argument a table keyed by name ("eager")
-- or by name .. "_ms" ("eager_ms"), e.g. summary.json's `baselines`, a sweep row's `speedup` (its
-- "input" is not a baseline)
function M.saved(...)
  local found, out = {}, {}
  for i = 1, select("#", ...) do
    local t = select(i, ...)
    for k, v in pairs(type(t) == "table" and t or {}) do
      local name = type(k) == "string" and (k:match("^(.+)_ms$") or k)
      if name and name ~= "input" and (type(v) == "number" or type(v) == "table") then found[name] = true end
    end
  end
  for _, name in ipairs(M.FALLBACK) do
    if found[name] then out[#out + 1] = name; found[name] = nil end
  end
  local rest = {}
  for name in pairs(found) do rest[#rest + 1] = name end
  table.sort(rest)
  for _, name in ipairs(rest) do out[#out + 1] = name end
  if #out == 0 then for i, name in ipairs(M.FALLBACK) do out[i] = name end end
  return out
end

return M
