-- The promotion gate: the one decision "does this child replace its parent" (and "does this
-- kernel replace the best so far"). Every policy and the driver ask it here, so a stronger
-- comparison (for example both kernels timed interleaved in one evaluator job) is a change to
-- this file only.
local select = require("agents.lib.select")
local options = require("agents.lib.options")

local M = {}

-- promote(run, parent, child) -> true, why | false, why. parent and child are kernel records or
-- attempts with .result (an evaluator result). A child replaces its parent only when it verified
-- and its median beats the parent's by the minimum gain (--min-gain percent) beyond both
-- measured spreads. A result with ok=false never wins, whatever its time.
function M.promote(run, parent, child)
  local pr, cr = parent and parent.result, child and child.result
  if not (cr and cr.ok == true) then
    return false, "not verified (" .. tostring(cr and cr.stage or "no result") .. ")"
  end
  local ct, pt = cr.time_ms, pr and pr.time_ms
  if not (type(ct) == "table" and type(ct.median) == "number") then return false, "no time" end
  if not (type(pt) == "table" and type(pt.median) == "number") then return true, "the parent has no time" end
  local pct = run.opts.min_gain or options["min-gain"].default
  if select.better(ct, pt, pct / 100) then
    return true, string.format("%.4f ms beats %.4f ms by more than %g%% and both spreads", ct.median, pt.median, pct)
  end
  return false, string.format("%.4f ms vs %.4f ms: inside %g%% or the spreads", ct.median, pt.median, pct)
end

-- keep_best(run, beam, children) -> a beam of one: the fastest verified child that passes the
-- gate against the current head, else the head unchanged (greedy, tune and skill keep this way).
function M.keep_best(run, beam, children)
  local head = beam[1]
  local ranked = select.rank({}, children)
  for _, c in ipairs(ranked) do
    if c.ok and M.promote(run, head, c) then return { c } end
  end
  return { head }
end

return M
