-- The promotion gate: the one decision "does this child replace its parent" (and "does this
-- kernel replace the best so far"). Every policy and the driver ask it here.
--
-- Two steps: the search-time medians must show the gain beyond both spreads (cheap, and enough
-- to say no); then the parent and the child are timed interleaved in one evaluator job (blocks
-- A B B A on the same inputs, pool:compare), and the child wins only if the blocks agree on a
-- speedup of at least --min-gain percent, with a coefficient of variation under --max-cv or with
-- so many pairs showing the gain that chance is ruled out (a sign test). Where the median shows
-- the gain but the pairs disagree, one larger comparison is made and decides alone.
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
  return false, M.inside_noise(ct, pt, pct)
end

-- inside_noise(child_time, parent_time, pct) -> why a child's median is no gain: not faster, or
-- faster by less than the noise rank.better allows, with the spreads and the bar that decided
function M.inside_noise(ct, pt, pct)
  local head = string.format("%.4f ms vs %.4f ms", ct.median, pt.median)
  local cs, ps = rank.spread(ct), rank.spread(pt)
  local spreads = string.format("spreads ±%.4f ms (child) and ±%.4f ms (parent)", cs, ps)
  if ct.median >= pt.median then return string.format("%s: not faster (%s)", head, spreads) end
  local bar = math.max(cs, ps, pct / 100 * pt.median)
  return string.format("%s: %.1f%% faster, inside the noise: %s; a gain must pass %.4f ms (the larger spread, at least %g%%)",
    head, (pt.median - ct.median) / pt.median * 100, spreads, bar, pct)
end

-- The comparisons' sizes, in blocks (pairs of blocks A B | B A = rounds / 2): the first, and the
-- larger one made once where the first's pairs disagree.
M.ROUNDS, M.ROUNDS_AGAIN = 8, 32
-- How often a child no faster than the bar may pass the sign test by chance: four pairs of four
-- in the first comparison; 13 pairs of 16 in the larger one.
M.CHANCE, M.CHANCE_AGAIN = 1 / 16, 1 / 32

-- chance_of(k, n) -> the probability that at least k of n pairs clear the bar by chance, were the
-- child's true ratio exactly at it (each pair then as likely above as below: a fair coin)
function M.chance_of(k, n)
  local p, c = 0, 1  -- c = n choose i
  for i = 0, n do
    if i >= k then p = p + c end
    c = c * (n - i) / (i + 1)
  end
  return p / 2 ^ n
end

-- interleaved(run, parent, child, rounds) -> {ok, speedup, min, p10, p90, cv, pairs, ratios, error}:
-- both timed in one job of `rounds` blocks (default M.ROUNDS)
function M.interleaved(run, parent, child, rounds)
  rounds = rounds or M.ROUNDS
  local key = tostring(parent.fingerprint or parent.id) .. "|" .. tostring(child.fingerprint or child.id) .. "|" .. rounds
  made[run] = made[run] or {}
  if made[run][key] then return made[run][key] end
  local res = run.pool:compare(run.job(nil, { candidates = { parent.code, child.code }, rounds = rounds }))
  local out
  if res.ok then
    local sp = res.candidates[2].speedup
    out = { ok = true, speedup = sp.median, min = sp.min, p10 = sp.p10, p90 = sp.p90, cv = sp.cv, pairs = sp.pairs,
      ratios = sp.ratios, rounds = rounds }
  else
    out = { ok = false, error = res.error or res.stage, rounds = rounds }
  end
  made[run][key] = out
  return out
end

-- verdict(run, c, bar, chance) -> "gain" | "under" | "disagree", why: one comparison judged
local function verdict(run, c, bar, chance)
  if c.speedup < bar then
    return "under", string.format("interleaved: %.3fx over the parent, under %g%%", c.speedup, (bar - 1) * 100)
  end
  local above, n = 0, 0
  for _, r in ipairs(c.ratios or {}) do
    n = n + 1
    if r >= bar then above = above + 1 end
  end
  local figures = string.format("%.3fx over the parent (pairs %.3f..%.3f, cv %.3f, %d of %d pairs show the gain)",
    c.speedup, c.p10 or c.speedup, c.p90 or c.speedup, c.cv, above, n)
  -- a loaded machine spreads the ratios of a large gain: pairs that nearly all show it are
  -- consistent however much they differ
  if c.cv <= M.max_cv(run) or (n > 0 and M.chance_of(above, n) <= chance) then
    return "gain", "interleaved: " .. figures
  end
  return "disagree", string.format("interleaved: %s, but the pairs vary (cv above %g)", figures, M.max_cv(run))
end

-- promote(run, parent, child) -> true, why | false, why. parent and child are kernel records or
-- attempts with .code and .result (an evaluator result). A result with ok=false never wins.
function M.promote(run, parent, child)
  local pct = run.opts.min_gain or options["min-gain"].default
  local ok, why, no_parent_time = nominal(run, parent, child, pct)
  if not ok or no_parent_time or run.opts.gate == "noise" or not (parent.code and child.code) then
    return ok, why
  end
  local bar = 1 + pct / 100
  local c = M.interleaved(run, parent, child)
  child.comparison = c
  if not c.ok then return false, "interleaved timing failed: " .. tostring(c.error) end
  local v, why2 = verdict(run, c, bar, M.CHANCE)
  if v ~= "disagree" then return v == "gain", why2 end
  -- the median shows the gain, the pairs do not agree on it: one larger comparison decides
  -- alone (the first's figures stay in the reason)
  local again = M.interleaved(run, parent, child, M.ROUNDS_AGAIN)
  child.comparison = again
  if not again.ok then return false, why2 .. "; again: interleaved timing failed: " .. tostring(again.error) end
  local v2, why3 = verdict(run, again, bar, M.CHANCE_AGAIN)
  return v2 == "gain", why2 .. "; again, " .. M.ROUNDS_AGAIN .. " blocks: " .. why3
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
