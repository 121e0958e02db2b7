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

-- The four granularities a first kernel may have (KernelSkill's seed generator declares one):
-- the reply's `GRANULARITY:` line (prompts/generate.md) as a summary field
M.GRANULARITIES = { ["one hotspot"] = "one_hotspot", ["several ops"] = "several_ops", ["fuse many"] = "fuse_many",
  ["full rewrite"] = "full_rewrite" }

-- granularity(reply) -> one_hotspot|several_ops|fuse_many|full_rewrite, or "unstated" where the
-- reply has no such line or names none of the four (a model that skipped the line still wrote a kernel)
function M.granularity(reply)
  for line in tostring(reply or ""):gmatch("[^\n]+") do
    local said = line:match("^[%s%*`#>-]*[Gg][Rr][Aa][Nn][Uu][Ll][Aa][Rr][Ii][Tt][Yy][%s%*`]*[:=][%s%*`]*(.-)[%s%*`.]*$")
    if said then return M.GRANULARITIES[said:lower():gsub("[_-]", " "):gsub("%s+", " ")] or "unstated" end
  end
  return "unstated"
end

-- propose(run, w) -> {code, prompt, reply, error, llm_code, model, granularity}; w = {k, n, lessons}. The problem block goes
-- first (the same for every generator), the worker's approach last.
function M.propose(run, w)
  local a = run.ask_code({ tag = "generate", template = "generate", shared = run.problem_block(), vars = {
    language = run.language_name, kernel_rule = run.language_rules(),
    worker = w.k, workers = w.n, approach = M.APPROACHES[(w.k - 1) % #M.APPROACHES + 1],
    lessons = w.lessons or "(none)",
  } })
  return { code = a.code, prompt = a.prompt, reply = a.reply, error = a.error, llm_code = a.llm_code, model = a.model,
    granularity = M.granularity(a.reply) }
end

return M
