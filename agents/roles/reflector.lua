-- Reflector role: one LLM call per attempt, also for failures (a failed plan is the most useful
-- thing to remember). Without an LLM, a short factual reflexion is written from the numbers.
local json = require("kagent.json")

local M = {}

M.schema = [[{
  "was_diagnosis_correct": true,
  "was_fix_effective": false,
  "expected_outcome": "...",
  "actual_outcome": "...",
  "reasoning": "...",
  "lessons": ["..."],
  "avoid_patterns": ["..."],
  "try_patterns": ["..."]
}]]

local DELTA = { "dram_pct", "sm_pct", "l2_pct", "l1_pct", "occupancy", "regs", "stall_long", "coalescing", "kernel_count", "time_ms" }

function M.metric_delta(pp, cp)
  pp, cp = pp or {}, cp or {}
  local out = {}
  for _, k in ipairs(DELTA) do
    if pp[k] ~= nil or cp[k] ~= nil then
      out[#out + 1] = string.format("- %s: %s → %s", k, tostring(pp[k] or "-"), tostring(cp[k] or "-"))
    end
  end
  return #out > 0 and table.concat(out, "\n") or "(no counters on either side)"
end

-- outcome_text(attempt) -> one paragraph: success and speedup vs parent, or failure stage+error
function M.outcome_text(a)
  if a.outcome == "improved" or a.outcome == "slower" or a.outcome == "same" or a.outcome == "duplicate" then
    return string.format("Verified correct. Child median %.4f ms vs parent %.4f ms (%.3fx): %s.",
      a.child_ms or 0, a.parent_ms or 0, (a.parent_ms or 0) / math.max(a.child_ms or 1e-9, 1e-9), a.outcome)
  end
  return string.format("Failed at stage %s after %d attempt(s): %s", tostring(a.stage), a.tries or 1, tostring(a.error))
end

-- offline(a) -> reflexion table without an LLM
function M.offline(a)
  local ok = a.outcome == "improved"
  return {
    was_diagnosis_correct = json.null, was_fix_effective = ok,
    expected_outcome = "faster than the parent", actual_outcome = M.outcome_text(a),
    reasoning = "Recorded from the measured outcome (no LLM reflexion).",
    lessons = { (a.lesson or (a.skill or "this plan")) .. (ok and " helped" or " did not help")
      .. " (" .. tostring(a.outcome) .. ")" },
    avoid_patterns = ok and json.empty_array or { a.skill or "same plan" }, try_patterns = json.empty_array,
  }
end

-- reflect(run, parent, a) -> reflexion table, prompt, reply. Without an LLM (or for the tuner,
-- which has none) the reflexion is the measured outcome.
function M.reflect(run, parent, a)
  if not run.llm then return M.offline(a), nil, nil end
  local q = run.ask_json({ tag = "reflect", template = "reflect", shared = run.parent_block(parent),
    want = { fields = { "lessons", "reasoning", "was_fix_effective" }, schema = M.schema }, vars = {
      bottleneck = a.bottleneck_text or "", outcome = M.outcome_text(a),
      child_code = a.code ~= "" and a.code or "(no code)", metric_delta = M.metric_delta(parent.profile, a.profile),
      schema = M.schema,
    } })
  if type(q.value) ~= "table" then
    local r = M.offline(a)
    r.reasoning = r.reasoning .. " (the LLM reply had no usable JSON)"
    return r, q.prompt, q.res and q.reply or nil
  end
  return q.value, q.prompt, q.reply
end

return M
