-- Optimizer role: one LLM call per worker, given its own bottleneck, the recommended fix (which
-- KernelAgent's optimizer never saw), the matching skill, and this parent's history.
local metrics = require("agents.lib.metrics")
local json = require("kagent.json")

local M = {}

local function fixes_text(b)
  local out = {}
  for i, f in ipairs(b.recommended_fixes or {}) do
    out[#out + 1] = string.format("%d. %s%s", i, tostring(f.fix or f), f.rationale and (" — " .. f.rationale) or "")
  end
  return #out > 0 and table.concat(out, "\n") or "(none given: choose the most direct fix)"
end

local function bottleneck_text(b)
  local lines = { string.format("[%s] %s", b.category or "?", b.summary or "") }
  if b.reasoning and b.reasoning ~= "" then lines[#lines + 1] = b.reasoning end
  for _, rc in ipairs(b.root_causes or {}) do
    local ev = {}
    for _, e in ipairs(rc.evidence or {}) do
      ev[#ev + 1] = string.format("%s=%s", tostring(e.metric), tostring(e.value))
    end
    lines[#lines + 1] = "- cause: " .. tostring(rc.cause) .. (#ev > 0 and (" (" .. table.concat(ev, ", ") .. ")") or "")
  end
  return table.concat(lines, "\n")
end
M.bottleneck_text = bottleneck_text

function M.skill_text(ctx, b, hits)
  local s
  if b.skill then
    for _, h in ipairs(ctx.skills) do if h.name == b.skill then s = h end end
  end
  if not s and hits and hits[1] then s = hits[1].skill end
  if not s then return "(none)" end
  return string.format("%s: %s\nExpected to move: %s\nAvoid: %s", s.name, s.intent,
    table.concat(s.expected or {}, "; "), table.concat(s.avoid or {}, "; ")), s.name
end

-- propose(ctx, parent, b, hits, history, lessons) -> {code, prompt, reply, skill} or nil, err
function M.propose(ctx, parent, b, hits, history, lessons)
  local skill_text, skill_name = M.skill_text(ctx, b, hits)
  local prompt = ctx.render("optimize", {
    dtype = ctx.dtype, bottleneck = bottleneck_text(b), recommended_fix = fixes_text(b),
    skill = skill_text, gpu = ctx.gpu_text or "unknown", problem_code = ctx.problem_code,
    timing = ctx.timing_text(parent.result or {}), kernel_code = parent.code,
    metrics = metrics.grouped_text(parent.result or {}), history = history, lessons = lessons,
    entry_point = ctx.entry_point(parent.code),
  })
  local res, err = ctx.chat(prompt, "optimize")
  if not res then return { prompt = prompt, reply = "LLM call failed: " .. tostring(err), skill = skill_name, error = err } end
  local code = ctx.extract_code(res.text)
  return { code = code, prompt = prompt, reply = res.text, skill = skill_name }
end

return M
