-- A first kernel for a subgraph of agents/fuse.lua, with no LLM. Two sources (docs/agents.md,
-- "First programs"):
--   inductor  — on a GPU: the Triton code TorchInductor emits for the subgraph problem, made a
--               standalone kernel file (pool:analyze kind "inductor"). With --first-library deny
--               GEMMs and convolutions go to Inductor's Triton templates (max-autotune); with
--               allow (the default) Inductor may call cuBLAS/cuDNN for them, and the program's
--               row reports the share of time in library kernels.
--   reference — the subgraph's own PyTorch ops as a plain kernel_function: the CPU mode's stand-in
--               (CPU candidates are PyTorch) and, on a GPU, the program that measures what
--               composition itself costs (--first reference). It is all library kernels.
-- Either is untrusted like any candidate: verified against its subgraph by the evaluator.
local M = {}

M.SOURCES = { "inductor", "reference" }

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

-- inductor(run, u, path, library) -> source, or nil and why. path: the subgraph's problem file.
function M.inductor(run, u, path, library)
  local a = run.pool:analyze({ kind = "inductor", problem = path, dtype = run.dtype, library = library,
    timeout = run.opts.job_timeout })
  if not a.ok then return nil, tostring(a.error) end
  return a.source
end

-- order(run) -> the sources to try, in order: --first (auto: inductor on a GPU, reference in
-- CPU mode, where no Triton code can be emitted)
function M.order(run)
  local f = run.opts.first or "auto"
  if f == "auto" then
    if run.devices and run.devices[1] and run.devices[1].mode == "cpu" then return { "reference" } end
    return run.opts.first_library == "allow" and { "inductor", "reference" } or { "inductor" }
  end
  return { f }
end

-- label(source, cpu) -> how a row names the kernel's source
function M.label(source, cpu)
  if source == "reference" then
    return cpu and "reference ops (CPU stand-in: no Triton on CPU)" or "reference ops (library kernels)"
  end
  return "TorchInductor Triton"
end

return M
