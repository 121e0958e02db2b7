-- A first kernel for a subgraph of agents/fuse.lua, with no LLM. Two sources (docs/agents.md,
-- "First programs"):
--   inductor  — on a GPU: the Triton code TorchInductor emits for the subgraph problem, made a
--               standalone kernel file (pool:analyze kind "inductor"). With --first-library deny
--               GEMMs and convolutions go to Inductor's Triton templates (max-autotune); with
--               allow (the default) Inductor may call cuBLAS/cuDNN for them, and the program's
--               row reports the share of time in library kernels.
--   inductor_eager_layout — the same with Inductor's layout optimization off (kind "inductor",
--               layout "eager"): tried only for a subgraph with a convolution whose `inductor`
--               kernel was refused for its values, since cuDNN gets other algorithms (TF32 results
--               beyond fp32's tolerance of eager's) for the layouts Inductor picks.
--   inductor_max_autotune — the same compiled with max-autotune, GEMM backends ATen and Triton (kind
--               "inductor", max_autotune true): Inductor times cuBLAS/cuDNN beside its Triton
--               templates and keeps the faster. Not in M.order: agents/flows/floor.lua asks for it,
--               for the whole problem, where it has a GEMM or a convolution.
--   reference — the subgraph's own PyTorch ops as a plain kernel_function: the CPU mode's stand-in
--               (CPU candidates are PyTorch) and, on a GPU, the program that measures what
--               composition itself costs (--first reference). It is all library kernels.
-- Either is untrusted like any candidate: verified against its subgraph by the evaluator. Where
-- none verifies, one that was right but whose timing could not be trusted is composed (M.untimed).
local verdict = require("agents.lib.verdict")

local M = {}

M.SOURCES = { "inductor", "inductor_eager_layout", "inductor_max_autotune", "reference" }

-- reference(u) -> the reference kernel's source for a unique subgraph (subproblem.dedupe's)
function M.reference(u)
  return table.concat({
    "# First kernel of " .. u.dir .. " (agents/flows/first_kernel.lua, reference): the subgraph's own",
    "# PyTorch ops, no LLM. The CPU mode's stand-in, and on a GPU the measure of what composing costs.",
    require("agents.lib.subproblem").IMPORTS,
    u.function_body,
    "",
  }, "\n")
end

-- inductor(run, u, path, library, layout, max_autotune) -> source, or nil and why. path: the
-- subgraph's problem file; layout: "inductor" (Inductor's own choice, the default) or "eager";
-- max_autotune: true for max-autotune with ATen and Triton GEMMs
function M.inductor(run, u, path, library, layout, max_autotune)
  local a = run.pool:analyze({ kind = "inductor", problem = path, dtype = run.dtype, library = library,
    layout = layout, max_autotune = max_autotune == true, timeout = run.opts.job_timeout })
  if not a.ok then return nil, tostring(a.error) end
  return a.source
end

-- order(run) -> the sources to try, in order: --first (auto: inductor on a GPU, reference in
-- CPU mode, where no Triton code can be emitted)
function M.order(run)
  local f = run.opts.first or "auto"
  if f == "auto" then
    if run.devices and run.devices[1] and run.devices[1].mode == "cpu" then return { "reference" } end
    return run.opts.first_library == "allow" and { "inductor", "inductor_eager_layout", "reference" }
      or { "inductor", "inductor_eager_layout" }
  end
  return { f }
end

M.RECURRENT_WHY = "not tried: a recurrent layer, which TorchInductor unrolls over its sequence (its compile "
  .. "ran past the 600 s job timeout on every LSTM and GRU of KernelBench Level 3); the reference ops call cuDNN's"

-- worth(source, u, tried, order) -> whether a source is worth a try after the ones tried ({source =
-- the evaluator's result or why none}), and why not where that is worth saying:
-- inductor_eager_layout only where the subgraph convolves and Inductor's own kernel was refused
-- for its values (EMISMATCH, EPROPERTY), so never after an `inductor` not tried; no `inductor` for
-- a recurrent layer when the reference ops come later in `order` (M.order's)
function M.worth(source, u, tried, order)
  if source == "inductor" and u.categories and u.categories.recurrent then
    for _, later in ipairs(order or {}) do
      if later == "reference" then return false, M.RECURRENT_WHY end
    end
  end
  if source ~= "inductor_eager_layout" then return true end
  local r = tried.inductor
  return type(r) == "table" and (r.code == "EMISMATCH" or r.code == "EPROPERTY")
    and tostring(u.function_body or ""):find("conv", 1, true) ~= nil
end

-- untimed(order, results) -> the source to compose where none verified, and its refusal: the
-- first in `order` whose kernel passed every correctness check against its subgraph and lost only
-- its figure's trust (verdict.correct_untimed: a 10 us subgraph's timing spread on a busy host).
-- Its time is not used: the composed program is verified and timed as a whole, every check
-- applied to it, and only its figures are reported. nil where no source is such.
function M.untimed(order, results)
  for _, src in ipairs(order) do
    local why = verdict.correct_untimed(results[src])
    if why then return src, why end
  end
  return nil
end

-- label(source, cpu) -> how a row names the kernel's source
function M.label(source, cpu)
  if source == "reference" then
    return cpu and "reference ops (CPU stand-in: no Triton on CPU)" or "reference ops (library kernels)"
  end
  if source == "inductor_max_autotune" then return "TorchInductor max-autotune (ATen or Triton GEMMs)" end
  return source == "inductor_eager_layout" and "TorchInductor Triton (eager's layouts)" or "TorchInductor Triton"
end

return M
