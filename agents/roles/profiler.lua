-- Profiler role: a kernel's hardware profile. Candidates are verified and timed without one
-- (run.evaluate); the driver has this profile each kernel a policy keeps, and a parent whose
-- result has no counters yet, at most once per kernel.
local M = {}

-- profile(run, kernel) -> a result with counters merged over the kernel's evaluation result (its
-- timing kept), or nil when no profile is needed or the profile failed.
function M.profile(run, kernel)
  local r = kernel.result
  if not run.can_profile or kernel.profiled or (r and r.metrics ~= nil) then return nil end
  local p = run.pool:profile(run.job(kernel.code))
  if not (p and p.ok) then return nil end
  for k, v in pairs(r or {}) do if p[k] == nil then p[k] = v end end
  -- ranked by a model (--objective in-model): the figures that rank it stay the model's
  if r and r.in_model then
    p.time_ms, p.eager_ms, p.speedup_vs_eager = r.time_ms, r.eager_ms, r.speedup_vs_eager
  end
  return p
end

return M
