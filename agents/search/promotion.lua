-- The promotion gate: the one decision "does this child replace its parent" (and "does this
-- kernel replace the best so far"). Every policy and the driver ask it here.
--
-- Two steps: the search-time medians must show the gain beyond both spreads (cheap, and enough
-- to say no); then the parent and the child are timed interleaved in one evaluator job (blocks
-- A B B A on the same inputs, pool:compare), and the child wins only if the blocks agree on a
-- speedup of at least --min-gain percent with a coefficient of variation under --max-cv.
-- `--gate noise` stops after the first step.
local rank = require("agents.lib.rank")
local options = require("agents.run.options")

local M = {}

-- interleaved comparisons already made, per run: {parent fingerprint .. child fingerprint = answer}
local made = setmetatable({}, { __mode = "k" })

-- max_cv(run) -> the largest coefficient of variation a gain may carry
function M.max_cv(run)
  return run.opts.max_cv or (run.can_profile and 0.05 or 0.5)
end

local function nominal(run, parent, child, pct)
  local pr, cr = parent and parent.result, child and child.result
  if not (cr and cr.ok == true) then
    return false, "not verified (" .. tostring(cr and cr.stage or "no result") .. ")"
  end
  local ct, pt = cr.time_ms, pr and pr.time_ms
  if not (type(ct) == "table" and type(ct.median) == "number") then return false, "no time" end
  if not (type(pt) == "table" and type(pt.median) == "number") then return true, "the parent has no time", true end
  if rank.better(ct, pt, pct / 100) then
    return true, string.format("%.4f ms beats %.4f ms by more than %g%% and both spreads", ct.median, pt.median, pct)
  end
  return false, string.format("%.4f ms vs %.4f ms: inside %g%% or the spreads", ct.median, pt.median, pct)
end

-- interleaved(run, parent, child) -> {ok, speedup, cv, error}: both timed in one job
function M.interleaved(run, parent, child)
  local key = tostring(parent.fingerprint or parent.id) .. "|" .. tostring(child.fingerprint or child.id)
  made[run] = made[run] or {}
  if made[run][key] then return made[run][key] end
  local res = run.pool:compare(run.job(nil, { candidates = { parent.code, child.code } }))
  local out
  if res.ok then
    local sp = res.candidates[2].speedup
    out = { ok = true, speedup = sp.median, min = sp.min, p10 = sp.p10, p90 = sp.p90, cv = sp.cv, pairs = sp.pairs }
  else
    out = { ok = false, error = res.error or res.stage }
  end
  made[run][key] = out
  return out
end

-- promote(run, parent, child) -> true, why | false, why. parent and child are kernel records or
-- attempts with .code and .result (an evaluator result). A result with ok=false never wins.
function M.promote(run, parent, child)
  local pct = run.opts.min_gain or options["min-gain"].default
  local ok, why, no_parent_time = nominal(run, parent, child, pct)
  if not ok or no_parent_time or run.opts.gate == "noise" or not (parent.code and child.code) then
    return ok, why
  end
  local c = M.interleaved(run, parent, child)
  child.comparison = c
  if not c.ok then return false, "interleaved timing failed: " .. tostring(c.error) end
  if c.speedup < 1 + pct / 100 then
    return false, string.format("interleaved: %.3fx over the parent, under %g%%", c.speedup, pct)
  end
  -- a gain every pair of blocks shows is consistent however much the pairs differ (a loaded
  -- machine spreads the ratios of a large gain); otherwise the pairs must agree within max-cv
  local every_pair = c.min and c.min >= 1 + pct / 100
  if c.cv > M.max_cv(run) and not every_pair then
    return false, string.format("interleaved: %.3fx, but the blocks vary (cv %.3f > %g)", c.speedup, c.cv, M.max_cv(run))
  end
  return true, string.format("interleaved: %.3fx over the parent (blocks %.3f..%.3f, cv %.3f)", c.speedup,
    c.p10 or c.speedup, c.p90 or c.speedup, c.cv)
end

-- keep_best(run, beam, children) -> a beam of one: the fastest verified child that passes the
-- gate against the current head, else the head unchanged (greedy, tune and skill keep this way).
function M.keep_best(run, beam, children)
  local head = beam[1]
  local ranked = rank.rank({}, children)
  for _, c in ipairs(ranked) do
    if c.ok and M.promote(run, head, c) then return { c } end
  end
  return { head }
end

return M
