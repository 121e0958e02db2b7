-- agents/sweep.lua --kernelbench DIR: KernelBench's problems by level (DIR/level1/*.py, ...) or
-- by name, the LLM-free floor as the default policy, and a sweep that finds its problems again
-- under another copy of KernelBench (a sweep carried to another machine, pack.lua).
local fs = require("kagent.fs")
local levels = require("agents.tools.sweep.levels")

local M = {}

-- The default policy: the LLM-free floor for every level (docs/agents.md).
M.DEFAULT_POLICY, M.DEFAULT_ARGS = "fuse", { "--no-llm" }

-- parse_levels(text) -> {1, 2, 3}, or nil, message
function M.parse_levels(text)
  local out = {}
  for item in tostring(text):gmatch("[^,]+") do
    local n = tonumber(item:match("^%s*(%d+)%s*$"))
    if not n then return nil, string.format("--levels %s: expects level numbers such as 1,2,3", text) end
    out[#out + 1] = n
  end
  if #out == 0 then return nil, "--levels is empty" end
  return out
end

-- problems(dir, levels_text, list) -> the problems' paths joined with commas (plan.lua's
-- problem_paths takes them), or nil, message. list: names or paths of problems ("level2/
-- 12_Gemm_Multiply_LeakyReLU.py", "12_Gemm_Multiply_LeakyReLU", a path), comma-joined; without
-- it, every problem of the levels (default 1,2,3).
function M.problems(dir, levels_text, list)
  if not fs.is_dir(dir) then
    return nil, string.format("--kernelbench %s: no such folder (a KernelBench checkout's KernelBench/ folder, holding level1/ level2/ level3/)", dir)
  end
  local lv, lerr = M.parse_levels(levels_text or "1,2,3")
  if not lv then return nil, lerr end
  local paths = {}
  if list then
    for item in list:gmatch("[^,]+") do
      local found
      if fs.exists(item) then found = item
      elseif fs.exists(fs.join(dir, item)) then found = fs.join(dir, item)
      else
        local name = item:gsub("%.py$", "") .. ".py"
        for _, l in ipairs(lv) do
          local p = fs.join(dir, "level" .. l, name)
          if not found and fs.exists(p) then found = p end
        end
      end
      if not found then
        return nil, string.format("--problems: no problem %s in %s (levels %s): give level<N>/<file>.py, a name, or a path", item, dir,
          table.concat(lv, ","))
      end
      paths[#paths + 1] = found
    end
  else
    for _, l in ipairs(lv) do
      local sub = fs.join(dir, "level" .. l)
      if not fs.is_dir(sub) then return nil, string.format("--kernelbench %s: no level%d/ folder there", dir, l) end
      local names = {}
      for _, n in ipairs(fs.list(sub) or {}) do if n:match("%.py$") and not n:match("^_") then names[#names + 1] = n end end
      table.sort(names, require("agents.tools.sweep.plan").natural_less)
      for _, n in ipairs(names) do paths[#paths + 1] = fs.join(sub, n) end
    end
  end
  if #paths == 0 then return nil, string.format("--kernelbench %s: no problem files in levels %s", dir, table.concat(lv, ",")) end
  return table.concat(paths, ",")
end

-- mark(plan, dir): the plan's problems get their level and their place under the KernelBench
-- folder (levelN/file.py), so the sweep finds them again under another copy (reroot)
function M.mark(plan, dir)
  plan.kernelbench = fs.abspath(dir)
  for _, p in ipairs(plan.problems) do
    p.level = levels.level_of(p.problem)
    if p.level then p.kernelbench_path = string.format("level%d/%s", p.level, fs.basename(p.problem)) end
  end
end

-- reroot(plan, dir) -> nil, or why a problem cannot be found: each problem whose file is not
-- where the sweep found it is looked for under dir (the --kernelbench of this command line)
function M.reroot(plan, dir)
  for _, p in ipairs(plan.problems) do
    if not fs.exists(p.problem) then
      local there = dir and p.kernelbench_path and fs.join(dir, p.kernelbench_path)
      if not p.kernelbench_path then
        return string.format("problem %s: no file %s (the sweep's problem files must be where the sweep found them)", p.name, p.problem)
      end
      if not (there and fs.exists(there)) then
        return string.format("problem %s: no file %s%s; give --kernelbench DIR, this machine's copy of KernelBench", p.name,
          p.problem, there and (" nor " .. there) or "")
      end
      p.problem = fs.abspath(there)
    end
  end
  if dir then plan.kernelbench = fs.abspath(dir) end
end

return M
