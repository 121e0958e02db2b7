-- The baselines kernels are timed against. The evaluator states them once
-- (src/gpu/eval/kagent_eval/common/job_defaults.py): its ready line carries `baselines` (every baseline
-- it can time, in order) and `reported_baselines` (those every reported kernel is timed against,
-- in the same job), which pool:devices() gives and a run keeps in run.devices. Where no pool
-- exists (report pages drawn from saved runs), the names come from the saved records.
local json = require("kagent.json")

local M = {}

-- The one Lua statement of the names, a fallback only: for an evaluator whose ready line states
-- none (a worker older than the field, a test's fake pool) and for saved records that name none.
-- tests/lua/gpu_spec.lua checks it agrees with the worker's `reported_baselines`.
M.FALLBACK = { "eager", "compile" }

-- ordered(found) -> the names of the set `found`: the fallback's first, in its order, then the
-- rest by name; the fallback when the set is empty
local function ordered(found)
  local out, rest, first = {}, {}, {}
  for _, name in ipairs(M.FALLBACK) do
    first[name] = true
    if found[name] then out[#out + 1] = name end
  end
  for name in pairs(found) do
    if not first[name] then rest[#rest + 1] = name end
  end
  table.sort(rest)
  for _, name in ipairs(rest) do out[#out + 1] = name end
  if #out == 0 then for i, name in ipairs(M.FALLBACK) do out[i] = name end end
  return out
end

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
  local found = {}
  for i = 1, select("#", ...) do
    local t = select(i, ...)
    for k, v in pairs(type(t) == "table" and t or {}) do
      local name = type(k) == "string" and (k:match("^(.+)_ms$") or k)
      if name and name ~= "input" and (type(v) == "number" or type(v) == "table") then found[name] = true end
    end
  end
  return ordered(found)
end

-- listed(t, own) -> the baselines a saved record lists, measured or not: its keys <name>_ms whose
-- value is a number or json.null (a baseline the run's evaluator named and could not time), in
-- saved()'s order, the fallback when it lists none; `own` names a key of the record that is not a
-- baseline (a first program's own "time_ms"). E.g. summary.json's `baselines` (written for the
-- ready line's reported baselines, agents/search/summary.lua) or fuse's first_program record.
function M.listed(t, own)
  local found = {}
  for k, v in pairs(type(t) == "table" and t or {}) do
    local name = type(k) == "string" and k ~= own and k:match("^(.+)_ms$")
    if name and (type(v) == "number" or v == json.null) then found[name] = true end
  end
  return ordered(found)
end

return M
