-- Generation: a first correct kernel from the PyTorch problem alone, for runs that start with no
-- --kernel and nothing archived. `workers` LLM workers each write a kernel (each told a different
-- approach), verify it and refine it up to --refine times with the exact error; the first verified
-- kernel wins. Losers in an LLM call are canceled at once (the HTTP transfer aborts and the
-- provider slot is returned); a loser inside an evaluation finishes that job and stops, because an
-- evaluator job is not interrupted half way.
--
-- Trace: generate/w<k>/{gen_prompt.txt, gen_reply.txt, kernel_attempt_<i>.py, verify_<i>.json,
-- refine_<i>_{prompt,reply}.txt} and generate/summary.json (each worker's outcome and the
-- granularity its seed stated).
local task = require("kagent.task")
local ktime = require("kagent.time")
local log = require("kagent.log")
local json = require("kagent.json")
local generator = require("agents.roles.generator")
local verifier = require("agents.roles.verifier")

local M = {}

local function worker(run, k, n, shared, lessons)
  local dir = "generate/w" .. k
  local out = shared.outcomes[k]
  local function stop() return shared.winner ~= nil end
  local function phase(name) shared.phase[k] = name end
  require("agents.run.calls").at({ round = 0, parent = "problem", worker = k })
  phase("llm")
  local g = generator.propose(run, { k = k, n = n, lessons = lessons })
  run.rd:write(dir .. "/gen_prompt.txt", g.prompt)
  run.rd:write(dir .. "/gen_reply.txt", g.reply)  -- cut to run.MAX_REPLY_TRACE (run.transcript_trace)
  if g.error then
    out.outcome, out.error, out.llm_code = "llm_error", tostring(g.error), g.llm_code
    return
  end
  -- how much of the forward the seed takes over, as its reply stated (agents/roles/generator.lua)
  out.granularity = g.granularity
  local v = verifier.run(run, g.code, { dir = dir }, { stop = stop, phase = phase })
  out.attempts = v.tries
  if v.ok then
    out.outcome, out.time_ms = "verified", v.result.time_ms and v.result.time_ms.median
    if not shared.winner then
      shared.winner = { code = v.code, result = v.result, worker = k, attempts = v.tries, dir = dir,
        granularity = g.granularity }
      out.outcome = "won"
    end
  elseif v.stopped then
    out.outcome = "stopped"
  elseif v.llm_code then
    out.outcome, out.error, out.llm_code = "llm_error", v.llm_error, v.llm_code
  else
    local r = v.result or {}
    out.outcome, out.stage, out.error = "failed", r.stage, r.error
  end
end

-- The newest lessons recorded on this problem (any GPU): what earlier runs learned about it.
-- Lessons from other problems are left out; they would be noise for a first kernel.
function M.lessons_text(m)
  local rows = m.db:lessons({ problem_hash = m.info.problem_hash, limit = 5 }) or {}
  local out = {}
  for _, l in ipairs(rows) do out[#out + 1] = "- " .. tostring(l.text) end
  return #out > 0 and table.concat(out, "\n") or "(none recorded for this problem)"
end

-- run(run, n) -> winner {code, result, worker, attempts, dir, granularity} or nil, error text, and true when
-- every worker ended on an LLM failure (the LLM is down: not the problem's fault)
function M.run(run, n)
  n = math.max(1, math.floor(n))
  if not run.llm then
    return nil, "generating a kernel needs an LLM (set KAGENT_MODEL and its key), or pass --kernel"
  end
  local t0 = ktime.now()
  local lessons = M.lessons_text(run.mem)
  local shared = { phase = {}, outcomes = {}, finished = 0 }
  local tasks = {}
  log.info("generating a first kernel: %d workers, up to %d refinements each", n, run.opts.refine)
  run.progress:update({ phase = "generate", workers = n, busy = n })
  for k = 1, n do
    shared.outcomes[k] = { worker = k, outcome = "running" }
    tasks[k] = task.spawn({ name = "gen" .. k, fn = function()
      local ok, err = pcall(worker, run, k, n, shared, lessons)
      if not ok then
        shared.outcomes[k].outcome, shared.outcomes[k].error = "error", tostring(err)
        log.error("generator %d failed: %s", k, tostring(err))
      end
      shared.phase[k] = "done"
      shared.finished = shared.finished + 1
      run.progress:update({ busy = n - shared.finished })
    end })
  end
  -- the first verified kernel ends the race; until then each worker that ends is taken off
  local pending = { unpack(tasks) }
  while not shared.winner and #pending > 0 do table.remove(pending, (task.any(pending))) end
  for k, t in ipairs(tasks) do
    if shared.phase[k] == "llm" and task.kill(t) then
      shared.outcomes[k].outcome = "canceled"
    elseif shared.phase[k] == "eval" then
      shared.outcomes[k].outcome = "stopped"  -- ends after the evaluation it is in
    end
  end
  local w = shared.winner
  local u = run.usage()
  run.rd:write("generate/summary.json", { workers = n, winner = w and w.worker or json.null,
    wall_s = ktime.now() - t0, outcomes = shared.outcomes, tokens = u.tokens, cost_usd = u.cost_usd })
  run.progress:update({ phase = false, busy = 0 })
  if not w then
    local why, llm_down = {}, true
    for k, o in ipairs(shared.outcomes) do
      -- a question a strict replay had no answer to was never sent: the LLM is not down
      -- nor is it when it answered with no code (ENOCODE): it answered
      if (o.outcome ~= "llm_error" or o.llm_code == "EREPLAY" or o.llm_code == "ENOCODE") and o.outcome ~= "canceled" then
        llm_down = false
      end
      why[#why + 1] = string.format("w%d %s%s", k, o.outcome,
        o.error and (": " .. tostring(o.error):sub(1, 160)) or "")
    end
    return nil, "no generated kernel verified (" .. table.concat(why, "; ") .. "); see "
      .. run.rd:path("generate"), llm_down
  end
  log.info("generator %d verified a kernel after %d attempt(s) in %.1f s", w.worker, w.attempts, ktime.now() - t0)
  return w
end

return M
