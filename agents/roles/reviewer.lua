-- Reviewer role (--review, docs/agents.md "The reviewer"): one LLM call reads an accepted kernel
-- next to its problem and proposes inputs that should break it, described as data
-- (prompts/review.md): sizes within the problem's contract, edge values, layouts, aliasing,
-- call sequences. The evaluator checks each proposal and runs it as extra trials
-- (src/gpu/eval/kagent_eval/common/extra_trials.py); agents/search/review.lua acts on the verdict.
local M = {}

-- the shape prompts/review.md asks for
M.SCHEMA = [[{"proposals": [{"id": "...", "why": "...", "calls": [{"sizes": {}, "inputs": [{"values": "...", "layout": "..."}]}]}]}]]
-- the evaluator runs at most this many proposals and calls per proposal (extra_trials.py)
M.MAX_PROPOSALS, M.MAX_CALLS, M.GROWTH = 8, 4, 4

-- propose(run, k) -> {proposals, prompt, reply, error, llm_code, model}: proposals is the list the
-- model gave (checked by the evaluator, not here), nil when the reply was lost or the call failed
function M.propose(run, k)
  local a = run.ask_json({ tag = "review", template = "review", shared = run.problem_block(),
    vars = { dtype = run.dtype, kernel_code = k.code, max_calls = M.MAX_CALLS, growth = M.GROWTH,
      max_proposals = M.MAX_PROPOSALS },
    want = { key = "proposals", schema = M.SCHEMA } })
  local list = a.value and a.value.proposals
  if a.value and type(list) ~= "table" then list = nil end
  return { proposals = list, prompt = a.prompt, reply = a.reply, error = a.error, llm_code = a.llm_code,
    model = a.model }
end

return M
