-- A run seen from one of its sessions (agents/fuse.lua): the same options, pool, LLM and memory
-- database, but another problem (a subgraph written as a problem of its own), its own folder in
-- the run directory, its own evaluation cache and prompt blocks, and its own usage counter, so
-- its generation session (agents/search/generate.lua) runs unchanged and reports what it spent.
local run_lib = require("agents.run")
local features = require("agents.lib.features")

local M = {}

-- subgraph source -> its op class: the views of one subgraph (its first kernels, its session)
-- trace it once
local op_class_of = {}

local function add_usage(u, res)
  local x = res.usage or {}
  u.calls = u.calls + 1
  for _, k in ipairs({ "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens" }) do
    u[k] = u[k] + (tonumber(x[k]) or 0)
  end
  u.cost_usd = u.cost_usd + (tonumber(res.cost_usd) or 0)
end

-- derive(run, f) -> sub-run. f: problem_path, problem_code (default the run's), dir (folder under
-- the run directory, default the run directory), mem (default the run's), progress (default the
-- run's), job(j) -> j (adds fields to every evaluator job, e.g. the audit's threshold).
function M.derive(run, f)
  local r = setmetatable({}, { __index = run })
  r.problem_path = f.problem_path or run.problem_path
  r.problem_code = f.problem_code or run.problem_code
  -- a subgraph has its own op class (from its trace, once per subgraph); the run's own problem
  -- keeps the run's
  if f.problem_path and not op_class_of[r.problem_code] then
    op_class_of[r.problem_code] = features.problem_op_class(run.pool, r.problem_path, r.problem_code, run.dtype,
      run.opts and run.opts.job_timeout)
  end
  r.op_class = f.problem_path and op_class_of[r.problem_code] or run.op_class or features.op_class(r.problem_code)
  r.rd = f.dir and run.rd:sub(f.dir) or run.rd
  r.mem = f.mem or run.mem
  r.progress = f.progress or run.progress
  run_lib.add_helpers(r)
  local own = { calls = 0, input_tokens = 0, output_tokens = 0, cache_read_tokens = 0, cache_write_tokens = 0, cost_usd = 0 }
  local chat = r.chat
  function r.chat(...)
    local res, err, code = chat(...)
    if res then add_usage(own, res) end
    return res, err, code
  end
  function r.usage()
    local u = {}
    for k, v in pairs(own) do u[k] = v end
    u.tokens = kagent.llm.total_tokens(u)
    return u
  end
  if f.job then
    local job = r.job
    function r.job(code, extra) return f.job(job(code, extra)) end
  end
  return r
end

-- progress(main, total) -> a function(key) giving each of `total` parallel sessions a progress
-- object; the main line shows how many sessions are done and all their workers together
function M.progress(main, total, phase)
  local parts = {}
  local function show()
    local workers, busy, done = 0, 0, 0
    for _, p in pairs(parts) do
      workers, busy = workers + (p.workers or 0), busy + (p.busy or 0)
      if p.done then done = done + 1 end
    end
    main:update({ phase = string.format("%s %d/%d", phase, done, total), workers = workers, busy = busy })
  end
  return function(key)
    parts[key] = {}
    return {
      update = function(_, t)
        local p = parts[key]
        for k, v in pairs(t or {}) do p[k] = v end
        if t and t.phase == false then p.done, p.busy = true, 0 end
        show()
      end,
      finish = function() end,
    }
  end
end

return M
