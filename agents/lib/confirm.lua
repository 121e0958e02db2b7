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

local function retime(run, code, baselines)
  return run.pool:benchmark(run.job(code, baselines and { bench = { baselines = M.BASELINES } } or nil))
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

-- final(run, finalists, input) -> {kernel, result, confirmed, input_ms, tried}. finalists: kernel
-- records, best first. The first whose fresh measurement next to the baselines verifies is
-- the run's result; when none does, the best is reported unconfirmed with its search-time
-- result. The input is re-timed too, so speedup_vs_input compares two measurements of one moment.
function M.final(run, finalists, input)
  local out = { tried = {} }
  for _, k in ipairs(finalists) do
    local r = retime(run, k.code, true)
    out.tried[#out.tried + 1] = { id = k.id, ok = r.ok == true, stage = r.stage, error = r.error,
      time_ms = r.time_ms and r.time_ms.median }
    if r.ok then
      out.kernel, out.result, out.confirmed = k, r, true
      break
    end
    log.warn("confirmation of %s failed at %s: %s", tostring(k.id), tostring(r.stage), tostring(r.error))
  end
  if not out.kernel then
    out.kernel, out.result, out.confirmed = finalists[1], finalists[1].result, false
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

return M
