-- Decomposer role (agents/fuse.lua): one LLM call that splits the traced graph into subgraphs,
-- described as JSON (ops, the values crossing each border with their shapes, parameters). The
-- proposal is checked against the graph (agents/lib/decomposition.lua); a refused one is asked
-- again with every earlier refusal and its reasons in view.
local decomposition = require("agents.lib.decomposition")

local M = {}

-- the shape prompts/decompose.md asks for (renamed keys are mapped back to these)
M.SCHEMA = [[{"subgraphs": [{"name": "", "ops": [""], "inputs": [{"value": "", "shape": [1]}],
  "outputs": [{"value": "", "shape": [1]}], "params": [""], "fusion": ""}]}]]

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
  local q = run.ask_json({ tag = "decompose", template = "decompose", shared = run.problem_block(),
    vars = { graph = decomposition.text(a), refusals = M.refusals_text(refusals) },
    want = { key = "subgraphs", schema = M.SCHEMA } })
  if not q.res then
    return { prompt = q.prompt, reply = q.reply, error = tostring(q.error), llm_failed = true }
  end
  if type(q.value) ~= "table" then
    return { prompt = q.prompt, reply = q.reply, error = "the reply holds no JSON object (" .. tostring(q.error) .. ")" }
  end
  return { prompt = q.prompt, reply = q.reply, plan = q.value }
end

return M
