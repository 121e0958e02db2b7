-- The baselines kernels are timed against, stated once for every floor (docs/policies.md).
local M = {}

-- Every baseline the evaluator times, in its order: its job_defaults.BASELINES, which its ready
-- line carries as `baselines` (tests/lua/gpu_spec.lua checks the two agree).
M.ALL = { "eager", "compile", "compile_max_autotune" }

-- The references every reported kernel is timed against, in the same job.
M.REPORTED = { "eager", "compile" }

-- The baselines of the final confirmation: every one the evaluator times (eager, the default
-- torch.compile and its max-autotune mode).
M.FINAL = M.ALL

return M
