-- Confirmation of what a run reports: the start kernel measured next to the baselines, the
-- speed-of-light figure an early stop relies on, and at the end the best kernel re-measured in a
-- fresh job next to the baselines (same method for all). The driver calls these; nothing is
-- ranked, archived or reported from a measurement that did not come back ok.
local log = require("kagent.log")

local M = {}

-- The references every reported kernel is timed against, in the same job.
M.BASELINES = { "eager", "compile" }

-- with_baselines(run, code) -> evaluator result of a full evaluation timed next to the baselines
function M.with_baselines(run, code)
  return run.pool:evaluate(run.job(code, { bench = { baselines = M.BASELINES } }))
end

M.INPUT_TRIES = 3

-- input(run, code) -> the start kernel's evaluation next to the baselines. A timing the evaluator
-- could not trust (stage "timing": the machine was too noisy) is measured again, up to
-- INPUT_TRIES times, before the run gives up: every later comparison stands on this figure.
function M.input(run, code)
  local r
  for try = 1, M.INPUT_TRIES do
    r = M.with_baselines(run, code)
    if r.ok or r.stage ~= "timing" then return r end
    log.warn("the input kernel's timing was not trusted (try %d of %d): %s", try, M.INPUT_TRIES, tostring(r.error))
  end
  return r
end

local function retime(run, code)
  return run.pool:benchmark(run.job(code))
end

-- sol(run, kernel) -> speed-of-light percent of a fresh measurement, or nil, why. Only a
-- figure that verified again and is physically possible (<= 100%) may end a search.
function M.sol(run, kernel)
  local r = retime(run, kernel.code)
  if not (r and r.ok) then return nil, "re-measure failed: " .. tostring(r and r.error) end
  local sol = r.roofline and r.roofline.sol_pct
  if type(sol) ~= "number" then return nil, "no roofline" end
  if sol > 100 then return nil, string.format("SOL %.1f%% is beyond the physical bound", sol) end
  return sol
end

-- The baselines of the final confirmation: the default torch.compile and its max-autotune mode.
M.FINAL_BASELINES = { "eager", "compile", "compile_max_autotune" }

-- rank_finalists(run, finalists) -> finalists ordered by one interleaved timing of them all
-- (pool:compare: the same inputs, blocks in A B ... B A order), fastest first; the search-time
-- order when there is one finalist or the comparison fails. Each gets .final_rank_ms.
function M.rank_finalists(run, finalists)
  local n = math.min(#finalists, math.max(1, run.opts.finalists or 3))
  local top = {}
  for i = 1, n do top[i] = finalists[i] end
  if n < 2 then return finalists end
  local codes = {}
  for i, k in ipairs(top) do codes[i] = k.code end
  local res = run.pool:compare(run.job(nil, { candidates = codes }))
  if not res.ok then
    log.warn("interleaved re-measure of the finalists failed: %s", tostring(res.error))
    return finalists
  end
  for i, k in ipairs(top) do k.final_rank_ms = res.candidates[i].time_ms.median end
  table.sort(top, function(a, b) return a.final_rank_ms < b.final_rank_ms end)
  for i = n + 1, #finalists do top[#top + 1] = finalists[i] end
  return top
end

-- final_job(run, code) -> the confirmation job: a fresh-process re-measure (the evaluator's
-- `confirm`) next to eager, torch.compile and torch.compile max-autotune, the problem resized
-- to check that the kernel generalizes, and compute-sanitizer on a GPU unless --sanitize none.
function M.final_job(run, code)
  local extra = { bench = { baselines = M.FINAL_BASELINES }, confirm = true, generalize = true,
    require_generalize = run.opts.require_generalize or nil }
  if M.sanitizes(run) then extra.sanitize = true end
  return run.job(code, extra)
end

-- sanitizes(run) -> whether the final confirmation runs compute-sanitizer (on a GPU, unless
-- --sanitize none)
function M.sanitizes(run)
  return run.can_profile and (run.opts.sanitize or "final") ~= "none"
end

-- phase(run) -> the status line's name for the final confirmation
function M.phase(run)
  return M.sanitizes(run) and "confirmation + sanitizer" or "confirmation"
end

-- final(run, finalists, input) -> {kernel, result, confirmed, input_ms, tried}. finalists: kernel
-- records, best first. They are re-measured side by side, then the fastest whose confirmation
-- job passes is the run's result (a confirmation that fails, at any stage, moves on to the
-- next). When none passes there is no result: confirmed = false, no kernel and no figure, only
-- `tried` (each finalist's stage and error) — a figure that was not confirmed is not a result
-- (M.unconfirmed_line says so). The input is re-timed too, so speedup_vs_input compares two
-- measurements of one moment.
function M.final(run, finalists, input)
  local out = { tried = {} }
  for _, k in ipairs(M.rank_finalists(run, finalists)) do
    local r = run.pool:benchmark(M.final_job(run, k.code))
    out.tried[#out.tried + 1] = { id = k.id, ok = r.ok == true, stage = r.stage, error = r.error,
      time_ms = r.time_ms and r.time_ms.median, interleaved_ms = k.final_rank_ms }
    if r.ok then
      out.kernel, out.result, out.confirmed = k, r, true
      break
    end
    log.warn("confirmation of %s failed at %s: %s", tostring(k.id), tostring(r.stage), tostring(r.error))
  end
  if not out.kernel then
    out.confirmed = false
    return out
  end
  out.input_ms = input.result.time_ms.median
  if out.kernel == input then
    if out.confirmed then out.input_ms = out.result.time_ms.median end
  else
    local again = retime(run, input.code)
    if again and again.ok and again.time_ms then out.input_ms = again.time_ms.median end
  end
  return out
end

-- unconfirmed_line(tried) -> the one line a run ends with when no finalist confirmed: no figure,
-- each finalist's stage and why
function M.unconfirmed_line(tried)
  local why = {}
  for _, t in ipairs(tried or {}) do
    why[#why + 1] = string.format("%s at %s: %s", tostring(t.id), tostring(t.stage),
      tostring(t.error):sub(1, 160))
  end
  return "no confirmed kernel: " .. (#why > 0 and table.concat(why, "; ") or "no finalist")
end

-- verdict_word(summary) -> "yes" (confirmed), "not confirmed" (no finalist passed the final
-- confirmation) or "no" (failed, or no summary): the one word tables and pages show
function M.verdict_word(s)
  if M.reportable(s) then return "yes" end
  return type(s) == "table" and s.status == "unconfirmed" and "not confirmed" or "no"
end

-- reportable(summary) -> whether a summary carries figures (a confirmed best kernel). Tables
-- and pages show a speedup only where this holds, and "not confirmed" otherwise.
function M.reportable(s)
  return type(s) == "table" and s.verified == true
end

return M
