-- --shrink (agents/beam.lua, skill.lua, tune.lua and fuse.lua, as agents/split.lua and
-- integrate.lua take it): the run works on a smaller copy of its problem, so that Level 2 and 3
-- problems run on a CPU. The sizes are the evaluator's (the analysis's `shrink`, docs/lua-api.md:
-- the batch to 2, other extents to 16, else 32, else only the batch; the first setting at which
-- the model runs); the copy is the problem's own source with those size constants set again at
-- its end, which is what the analysis did (it set the module's attributes after import): every
-- function reading them at call time (get_inputs, get_init_inputs) sees the smaller ones.
local M = {}

M.FILE = "problem_shrunk.py"

-- source(code, shrunk) -> the problem's source with the constants of shrunk ({name = {from, to}})
-- set to their smaller values after everything else
function M.source(code, shrunk)
  local names = {}
  for name in pairs(shrunk) do names[#names + 1] = name end
  table.sort(names)
  local lines = { "", "", "# --shrink (agents/run/shrink.lua): size constants lowered so the problem runs small" }
  for _, name in ipairs(names) do
    lines[#lines + 1] = string.format("%s = %d  # was %d", name, shrunk[name][2], shrunk[name][1])
  end
  return code .. table.concat(lines, "\n") .. "\n"
end

-- apply(pool, path, code, opts) -> code, shrunk | nil, message. The problem analysed with
-- `shrink` on the run's pool; shrunk is nil where nothing could shrink (the run then works on the
-- problem as given, as split.lua's "as given").
function M.apply(pool, path, code, opts)
  local a = pool:analyze({ kind = "problem", problem = path, dtype = opts.dtype, shrink = true, timeout = opts.job_timeout })
  if not (a and a.ok) then
    return nil, string.format("the analysis of %s that finds its smaller sizes failed: %s", path, tostring(a and a.error))
  end
  if type(a.shrunk) ~= "table" or next(a.shrunk) == nil then return code, nil end
  return M.source(code, a.shrunk), a.shrunk
end

-- text(shrunk) -> "batch_size 128→2, dim 4096→16"
function M.text(shrunk)
  local parts = {}
  for k, v in pairs(shrunk or {}) do parts[#parts + 1] = string.format("%s %s→%s", k, v[1], v[2]) end
  table.sort(parts)
  return table.concat(parts, ", ")
end

return M
