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

-- propose(run, parent, d, hints) -> {code, prompt, reply, skill, error, llm_code, model}
-- (error and llm_code: the LLM call failed, or its reply was lost: ENOCODE)
-- hints: {history, lessons} as text.
function M.propose(run, parent, d, hints)
  hints = hints or {}
  local skill_text, skill_name = M.skill_text(run, d.skill)
  local vars = {
    dtype = run.dtype, bottleneck = direction.text(d), recommended_fix = direction.fixes_text(d),
    skill = skill_text, history = hints.history or "(none)", lessons = hints.lessons or "(none)",
    entry_point = run.entry_point(parent.code),
  }
  local a = run.ask_code({ tag = "optimize", template = "optimize", vars = vars, shared = run.parent_block(parent),
    base = parent.code })
  return { code = a.code, prompt = a.prompt, reply = a.reply, skill = skill_name, error = a.error, llm_code = a.llm_code,
    model = a.model }
end

return M
