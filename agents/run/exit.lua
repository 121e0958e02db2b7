-- Exit statuses of the entry points (docs/agents.md, "Exit status"), and the rules that pick
-- them wherever a run ends: a strict replay that met unrecorded calls, an LLM that stopped.
local M = {}

M.EXIT = { done = 0, error = 1, input = 2, llm_down = 3, replay_miss = 4, unconfirmed = 5, write_failed = 6,
  not_measured = 7 }

local function say(prog, msg) io.stderr:write(prog .. ": " .. msg .. "\n") end

-- replay_status(prog, summary, code) -> exit status: `code`, or 4 when a strict replay (cache
-- mode "replay") met questions it had no recorded answer to. Those branches stopped where they
-- were asked (stage "replay"), so the run does not reproduce the recorded one, and says so.
function M.replay_status(prog, s, code)
  local r = s.replay or {}
  if r.mode == "replay" and (r.misses or 0) > 0 then
    say(prog, string.format("strict replay: %d of %d LLM call(s) had no recorded answer; their branches stopped "
      .. "(see replay_misses.json in the run directory). This run does not reproduce the recorded one.",
      r.misses, r.calls or 0))
    return M.EXIT.replay_miss
  end
  return code
end

-- write_failed_status(prog, run) -> 6 where a write of the run folder or its memory database
-- failed (agents/run/writes.lua), saying which and why; nil where every write held. No result is
-- reported then: a run whose record is incomplete is no success.
function M.write_failed_status(prog, run)
  local line = require("agents.run.writes").failure(run)
  if not line then return nil end
  say(prog, string.format("stopped: %s. The record of run %s is incomplete, so it reports no result: free space on "
    .. "that filesystem (or end the process that holds the database locked) and run again.", line, run.rd.dir))
  return M.EXIT.write_failed
end

-- llm_down_status(prog, guard, resume) -> exit status of a run the LLM stopped (guard:
-- agents/run/llm_guard.lua, down): 2 where the provider refused the key or has no such model or
-- URL (bad input: no retry helps), else 3; the message names what to do, and `resume` (a
-- command) how to go on, if any
function M.llm_down_status(prog, guard, resume)
  local next = resume and ("\n  " .. resume) or ""
  if guard.fatal then
    say(prog, string.format("stopped: %s. Fix the %s%s", guard.down,
      guard.fatal == "EAUTH" and "key" or "model name or the URL",
      resume and ", then continue with:" .. next or " and run again."))
    return M.EXIT.input
  end
  -- a run that can go on stops; one that cannot ends here, and says the LLM is why
  say(prog, string.format("%s: %s. Nothing was learned from the failed calls; %s",
    resume and "stopped" or "the LLM stopped answering", guard.down,
    resume and "the unfinished round is redone when the run continues:" .. next or "try again later."))
  return M.EXIT.llm_down
end

return M
