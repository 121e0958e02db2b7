-- The baselines kernels are timed against, stated once for every floor (docs/policies.md).
local M = {}

-- Every baseline the evaluator times, in its order: its job_defaults.BASELINES, which its ready
-- line carries as `baselines` (tests/lua/gpu_spec.lua checks the two agree). The final
-- confirmation times them all, and the baseline cache keeps them all.
M.ALL = { "eager", "compile", "compile_max_autotune" }

-- The references every reported kernel is timed against, in the same job.
M.REPORTED = { "eager", "compile" }

return M
