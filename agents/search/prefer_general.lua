-- At the end of a run, a kernel that generalizes wins over one that does not when their figures
-- are within noise (agents/search/confirm.lua calls this once a finalist confirmed). A kernel
-- that caches the first call's shape, or hard-codes the batch size, is as fast as an honest one
-- at the problem's shapes and returns wrong results at any other: the resized problem of the
-- confirmation (the evaluator's `generalize`) is what tells them apart, so the finalists after
-- such a winner whose interleaved figure is not clearly slower (agents/lib/rank.lua's noise) are
-- confirmed too, in order, and the first that confirms and generalizes is the result. A clearly
-- faster kernel that does not generalize stays the result (--require-generalize refuses it), and
-- says so wherever it is shown (agents/lib/generality.lua).
local log = require("kagent.log")
local rank = require("agents.lib.rank")

local M = {}

-- the figure two finalists are compared by: the interleaved timing of them all (confirm.lua's
-- rank_finalists, one moment and the same inputs), else the search's
local function figure(k)
  return k.final_rank_time or (k.result and k.result.time_ms)
end

-- within_noise(a, b) -> true when neither kernel's figure beats the other's beyond the noise of
-- both (rank.better); false where either has no figure
function M.within_noise(a, b)
  local ta, tb = figure(a), figure(b)
  if not (type(ta) == "table" and ta.median and type(tb) == "table" and tb.median) then return false end
  return not rank.better(ta, tb) and not rank.better(tb, ta)
end

-- prefer(ranked, out, confirm_one): out is confirm.final's answer with out.kernel confirmed;
-- confirm_one(k) -> result, phase. Where out.result does not generalize, each later finalist
-- of `ranked` within noise of out.kernel and not confirmed yet is confirmed (its outcome joins out.tried and its
-- phase out.phases.finalists); the first that passes and generalizes replaces out.kernel and
-- out.result, and out.preferred = {id, over, reason} says why.
function M.prefer(ranked, out, confirm_one)
  local best = out.kernel
  if not best or not out.result or out.result.generalizes ~= "no" then return end
  -- a finalist confirmed already (refused, or not measured in confirm.lua's passes) is not tried again
  local tried = {}
  for _, t in ipairs(out.tried or {}) do tried[t.id] = true end
  local after = false
  for _, k in ipairs(ranked) do
    if k == best then
      after = true
    elseif after and not tried[k.id] and M.within_noise(best, k) then
      local r, phase = confirm_one(k)
      out.phases.finalists[#out.phases.finalists + 1] = phase
      out.tried[#out.tried + 1] = { id = k.id, ok = r.ok == true, stage = r.stage, error = r.error,
        time_ms = r.time_ms and r.time_ms.median, interleaved_ms = k.final_rank_ms,
        generalizes = r.generalizes }
      if r.ok and r.generalizes == "yes" then
        out.preferred = { id = k.id, over = best.id, reason = string.format(
          "%s generalizes and %s does not (fails on the problem resized); their figures are within noise",
          tostring(k.id), tostring(best.id)) }
        log.info("final: %s", out.preferred.reason)
        out.kernel, out.result = k, r
        return
      end
    end
  end
end

return M
