-- A direction is what a policy's directions() hook hands to one worker: a bottleneck to remove
-- (beam), a planned skill (skill), a knob change (tune), or anything a user policy invents.
-- Fields the default worker and the attempt record read (all optional but summary):
--   summary, category, reasoning, root_causes, recommended_fixes  (prompts/optimize.md)
--   skill, bucket (bottleneck class for the skill's learned record), plan_signature
--   strategy (what strategy.json holds; default: the direction itself), trace ({file = text}
--   written into the worker's folder), lesson (the offline reflexion's lesson), role.
local M = {}

-- text(d) -> the direction as prompt text: category, summary, reasoning and cited evidence
function M.text(d)
  local lines = { string.format("[%s] %s", d.category or "?", d.summary or "") }
  if d.reasoning and d.reasoning ~= "" then lines[#lines + 1] = d.reasoning end
  for _, rc in ipairs(d.root_causes or {}) do
    local ev = {}
    for _, e in ipairs(rc.evidence or {}) do
      ev[#ev + 1] = string.format("%s=%s", tostring(e.metric), tostring(e.value))
    end
    lines[#lines + 1] = "- cause: " .. tostring(rc.cause) .. (#ev > 0 and (" (" .. table.concat(ev, ", ") .. ")") or "")
  end
  return table.concat(lines, "\n")
end

-- fixes_text(d) -> the recommended fixes as a numbered list
function M.fixes_text(d)
  local out = {}
  for i, f in ipairs(d.recommended_fixes or {}) do
    out[#out + 1] = string.format("%d. %s%s", i, tostring(f.fix or f), f.rationale and (" — " .. f.rationale) or "")
  end
  return #out > 0 and table.concat(out, "\n") or "(none given: choose the most direct fix)"
end

-- signature(d) -> the plan signature memory keys an attempt by (skill and what the plan is)
function M.signature(d)
  if d.plan_signature then return d.plan_signature end
  return (d.skill or "") .. ":" .. tostring(d.summary or ""):sub(1, 80)
end

-- fields a direction carries for its worker that are not part of the plan itself
M.NOT_STRATEGY = { trace = true, code = true, history = true, lessons = true }

-- strategy(d) -> the JSON-able table strategy.json holds (an array of one, as published traces)
function M.strategy(d)
  if d.strategy then return { d.strategy } end
  local s = {}
  for k, v in pairs(d) do
    if not M.NOT_STRATEGY[k] and type(v) ~= "function" then s[k] = v end
  end
  return { s }
end

return M
