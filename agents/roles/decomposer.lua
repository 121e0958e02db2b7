-- Decomposer role (agents/fuse.lua): one LLM call that splits the traced graph into subgraphs,
-- described as JSON (ops, the values crossing each border with their shapes, parameters). The
-- proposal is checked against the graph (agents/lib/decomposition.lua); a refused one is asked
-- again with every earlier refusal and its reasons in view.
local decomposition = require("agents.lib.decomposition")

local M = {}

-- refusals_text(refusals) -> the earlier proposals' refusals, for the prompt ("" when none)
function M.refusals_text(refusals)
  if not refusals or #refusals == 0 then return "" end
  local out = { "", "## Earlier proposals were refused", "Fix every reason below." }
  for _, r in ipairs(refusals) do
    out[#out + 1] = string.format("Proposal %d:\n%s", r.try, decomposition.reasons_text(r.reasons))
  end
  return table.concat(out, "\n")
end

-- propose(run, analysis, refusals) -> {prompt, reply, plan, error}: plan is the decoded JSON
-- (nil when the reply held none; error then says so); error is also set when the call failed
-- (then llm_failed = true)
function M.propose(run, a, refusals)
  local prompt = run.render("decompose", { graph = decomposition.text(a), refusals = M.refusals_text(refusals) })
  local shared = run.problem_block()
  local res, err = run.chat(prompt, "decompose", shared)
  prompt = run.full_prompt(prompt, shared)
  if not res then
    return { prompt = prompt, reply = "LLM call failed: " .. tostring(err), error = tostring(err), llm_failed = true }
  end
  local plan, perr = run.extract_json(res.text)
  if type(plan) ~= "table" then
    return { prompt = prompt, reply = res.text, error = "the reply holds no JSON object (" .. tostring(perr) .. ")" }
  end
  return { prompt = prompt, reply = res.text, plan = plan }
end

return M
