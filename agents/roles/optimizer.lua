-- Optimizer role: one LLM call per worker that rewrites the parent kernel along one direction,
-- given its recommended fix (which KernelAgent's optimizer never saw), the matching skill, and
-- what was already tried from this parent. The parent's block goes first (shared by every
-- worker of the parent, so a provider can cache it); the worker's own part follows.
local direction = require("agents.lib.direction")

local M = {}

-- skill_text(run, name) -> the skill as prompt text (intent, expected moves, anti-patterns), name
function M.skill_text(run, name)
  local s
  for _, sk in ipairs(run.skills or {}) do if sk.name == name then s = sk end end
  if not s then return "(none)" end
  return string.format("%s: %s\nExpected to move: %s\nAvoid: %s", s.name, s.intent,
    table.concat(s.expected or {}, "; "), table.concat(s.avoid or {}, "; ")), s.name
end

-- propose(run, parent, d, hints) -> {code, prompt, reply, skill, error, llm_code}
-- (error and llm_code: the LLM call failed)
-- hints: {history, lessons} as text.
function M.propose(run, parent, d, hints)
  hints = hints or {}
  local skill_text, skill_name = M.skill_text(run, d.skill)
  local prompt = run.render("optimize", {
    dtype = run.dtype, bottleneck = direction.text(d), recommended_fix = direction.fixes_text(d),
    skill = skill_text, history = hints.history or "(none)", lessons = hints.lessons or "(none)",
    entry_point = run.entry_point(parent.code),
  })
  local shared = run.parent_block(parent)
  local res, err, llm_code = run.chat(prompt, "optimize", shared)
  prompt = run.full_prompt(prompt, shared)
  if not res then
    return { prompt = prompt, reply = "LLM call failed: " .. tostring(err), skill = skill_name, error = err, llm_code = llm_code }
  end
  local code, cerr, ccode = run.code_from(res.text)
  return { code = code, prompt = prompt, reply = res.text, skill = skill_name, error = cerr, llm_code = ccode }
end

return M
