-- Generator role: one LLM call that writes a first kernel from the PyTorch problem alone. Parallel
-- generator workers get different approaches to try, so a hard problem is attacked several ways
-- at once instead of four times the same way.
local M = {}

-- Approaches handed out round robin: worker 1 the most direct, later ones riskier layouts.
M.APPROACHES = {
  "Take the most direct mapping: one program (thread block) per independent output tile, the "
    .. "obvious loop order, no tricks. A correct, simple kernel is the goal.",
  "Fuse everything the forward does into as few kernels as possible, so each input element is "
    .. "read from memory once; keep intermediate values in registers.",
  "Favour wide, coalesced memory access: vectorised loads along the contiguous dimension, block "
    .. "sizes that are powers of two, masks for the tails.",
  "Split long reductions across several programs and combine the partial results in a second, "
    .. "small kernel (deterministic order, no atomics).",
}

local KERNEL_RULE = {
  gpu = "The main computation runs in your own Triton kernels (`@triton.jit`), launched from "
    .. "`forward`. Do not call PyTorch, cuBLAS or cuDNN for it; PyTorch may allocate outputs and "
    .. "reshape views.",
  cpu = "CPU mode: write it in pure PyTorch operations (no Triton, no GPU), as a faster "
    .. "formulation of the same computation than the reference.",
}

-- propose(run, w) -> {code, prompt, reply, error, llm_code}; w = {k, n, lessons}. The problem block goes
-- first (the same for every generator), the worker's approach last.
function M.propose(run, w)
  local a = run.ask_code({ tag = "generate", template = "generate", shared = run.problem_block(), vars = {
    language = run.can_profile and "Triton" or "PyTorch (CPU mode)",
    kernel_rule = run.can_profile and KERNEL_RULE.gpu or KERNEL_RULE.cpu,
    worker = w.k, workers = w.n, approach = M.APPROACHES[(w.k - 1) % #M.APPROACHES + 1],
    lessons = w.lessons or "(none)",
  } })
  return { code = a.code, prompt = a.prompt, reply = a.reply, error = a.error, llm_code = a.llm_code, model = a.model }
end

return M
