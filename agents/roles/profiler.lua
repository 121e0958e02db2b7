-- Profiler role: make sure a kernel has one profile. Beam members were profiled when they were
-- evaluated as children, so a parent is profiled at most once per run (KernelAgent re-ran Nsight
-- Compute on every parent every round, ~10 s each).
local metrics = require("agents.lib.metrics")

local M = {}

-- ensure(ctx, kernel) -> result with metrics (kernel.result updated), profile summary
function M.ensure(ctx, kernel)
  local r = kernel.result
  if not (r and r.ok) or (r.metrics == nil and ctx.can_profile and not kernel.profiled) then
    local job = ctx.job(kernel.code)
    r = ctx.pool:profile(job)
    kernel.profiled = true
    if r and r.ok then
      -- keep the benchmark numbers from the evaluation; take counters from the profile
      local old = kernel.result or {}
      for k, v in pairs(old) do if r[k] == nil then r[k] = v end end
      kernel.result = r
    end
  end
  kernel.profile = metrics.summarize(kernel.result)
  return kernel.result, kernel.profile
end

-- write(rd, wdir, kernel, name, round) -> writes <name>_ncu_metrics.json
function M.write(ctx, wdir, kernel, name, round)
  ctx.rd:write(wdir .. "/" .. name .. "_ncu_metrics.json",
    ctx.rd.ncu_json(kernel.result, kernel.path, ctx.problem_path, round))
end

return M
