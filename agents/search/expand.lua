-- The default expand() of a policy: the LLM worker. For one parent and one direction it asks the
-- optimizer for a rewrite (prompts/optimize.md), then verifies it and repairs it on failure
-- (agents/roles/verifier.lua). It returns a draft for agents/search/attempt.lua; the driver decides
-- the outcome, has it reflected on and stores it.
local optimizer = require("agents.roles.optimizer")
local verifier = require("agents.roles.verifier")

local M = {}

-- hints(run, parent, d) -> {history, lessons} for the prompts of a parent's workers: what was tried
-- from this parent, and verified lessons of similar problems (a direction may bring its own)
function M.hints(run, parent, d)
  return {
    history = d.history or run.mem:history_text(parent.fingerprint),
    lessons = d.lessons or run.mem:lessons_text({ op_class = run.op_class, bottleneck = d.bucket or d.category,
      query = table.concat({ run.op_class or "", d.skill or "", d.summary or "" }, " ") }),
  }
end

-- expand(parent, d, run, w, opts) -> draft {code, result, tries, chain, cached, skill, prompt_path,
-- reply_path, llm_code, llm_error} or {stage = "llm", error, llm_code}. llm_code is set when an
-- LLM call (the rewrite, or a repair) failed. opts.repair replaces the verifier's repair step.
function M.expand(parent, d, run, w, opts)
  local prop = optimizer.propose(run, parent, d, M.hints(run, parent, d))
  local pp, rp = w.dir .. "/opt_prompt.txt", w.dir .. "/opt_reply.txt"
  run.rd:write(pp, prop.prompt)
  run.rd:write(rp, prop.reply)  -- cut to run.MAX_REPLY_TRACE (run.transcript_trace)
  if prop.error then
    return { stage = "llm", error = tostring(prop.error), llm_code = prop.llm_code or "ELLM", skill = prop.skill,
      prompt_path = pp, reply_path = rp, model = prop.model }
  end
  local v = verifier.run(run, prop.code, w, { target = string.format('the bottleneck "%s"', d.summary or ""),
    keep = "the optimization", shared = run.parent_block(parent), repair = opts and opts.repair })
  return { code = v.code, result = v.result, tries = v.tries, chain = v.chain, cached = v.cached,
    skill = prop.skill, prompt_path = pp, reply_path = rp, llm_code = v.llm_code, llm_error = v.llm_error,
    model = prop.model }
end

return M
