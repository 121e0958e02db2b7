-- What agents/bench.lua measures: problems, each with its PyTorch reference, its input kernel and
-- its optimized kernel, found in
--   a problem folder in KernelAgent's artifact layout (problem.py, input_kernel.py,
--     optimized_kernel_beam_search.py), or a folder of such folders;
--   a run folder (problem.py, input_kernel.py, best_kernel.py, summary.json), or a folder of runs;
--   a sweep folder (sweep.json: the run folder of each problem).
local fs = require("kagent.fs")
local json = require("kagent.json")
local plan_lib = require("agents.tools.sweep.plan")

local M = {}

-- Optimized kernel file names, in the order they are looked for.
M.OPTIMIZED = { "optimized_kernel_beam_search.py", "best_kernel.py" }

local function read_json(path)
  local s = fs.read(path)
  local v = s and json.decode(s)
  return type(v) == "table" and v or nil
end

-- one(dir, name) -> target {name, dir, problem, input, optimized, kind, dtype} or nil, why
local function one(dir, name)
  local problem = fs.join(dir, "problem.py")
  if not fs.exists(problem) then return nil, dir .. ": no problem.py" end
  local t = { name = name or fs.basename(fs.abspath(dir)), dir = fs.abspath(dir), problem = fs.abspath(problem) }
  if fs.exists(fs.join(dir, "input_kernel.py")) then t.input = fs.abspath(fs.join(dir, "input_kernel.py")) end
  for _, f in ipairs(M.OPTIMIZED) do
    if not t.optimized and fs.exists(fs.join(dir, f)) then t.optimized = fs.abspath(fs.join(dir, f)) end
  end
  local s = read_json(fs.join(dir, "summary.json"))
  if s then
    t.kind, t.dtype, t.run_id = "run", s.dtype, s.run_id
    -- a run is named by its problem (and its id when several runs of one problem are measured)
    t.name = name or (fs.basename(tostring(s.problem or "?")):gsub("%.py$", ""))
  else
    t.kind = "artifact"
  end
  if not t.input and not t.optimized then return nil, dir .. ": neither input_kernel.py nor an optimized kernel" end
  return t
end

local function sorted_dirs(folder)
  local names = {}
  for _, n in ipairs(fs.list(folder) or {}) do
    if fs.is_dir(fs.join(folder, n)) then names[#names + 1] = n end
  end
  table.sort(names, plan_lib.natural_less)
  return names
end

-- find(path) -> array of targets, or nil, why
function M.find(path)
  if not fs.is_dir(path) then return nil, path .. ": no such folder" end
  if fs.exists(fs.join(path, "problem.py")) then
    local t, err = one(path)
    if not t then return nil, err end
    return { t }
  end
  local out = {}
  local sweep = read_json(fs.join(path, "sweep.json"))
  if sweep then
    for _, r in ipairs(sweep.results or {}) do
      if type(r.run_dir) == "string" and fs.exists(fs.join(r.run_dir, "problem.py")) then
        local t = one(r.run_dir, r.name)
        if t then out[#out + 1] = t end
      end
    end
    if #out == 0 then return nil, path .. ": the sweep has no finished run (sweep.json results)" end
    return out
  end
  for _, n in ipairs(sorted_dirs(path)) do
    local d = fs.join(path, n)
    if fs.exists(fs.join(d, "problem.py")) then
      local t = one(d)
      if t then out[#out + 1] = t end
    end
  end
  if #out == 0 then
    return nil, path .. ": no problem folder (problem.py with input_kernel.py or an optimized kernel), run folder or sweep"
  end
  return out
end

-- distinct(list) -> list, each target's name its own: several runs of one problem (in a folder
-- of runs or given one by one) are told apart by run id, other namesakes by their folder. A
-- row is keyed by its name (the table, --json, --resume), so namesakes would share one row.
function M.distinct(list)
  local function counts()
    local c = {}
    for _, t in ipairs(list) do c[t.name] = (c[t.name] or 0) + 1 end
    return c
  end
  local count = counts()
  for _, t in ipairs(list) do if count[t.name] > 1 then t.name = t.run_id or t.dir end end
  count = counts()
  local seen = {}
  for _, t in ipairs(list) do
    if count[t.name] > 1 then  -- the same folder given twice
      seen[t.name] = (seen[t.name] or 0) + 1
      t.name = string.format("%s (%d)", t.name, seen[t.name])
    end
  end
  return list
end

return M
