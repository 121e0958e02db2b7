-- Ranking under measurement noise. A kernel's time is a median with a spread (p10..p90); two
-- kernels whose difference is inside the spread are treated as equal, and the incumbent wins ties,
-- so the beam does not churn on noise (REFERENCE §6 item 18).
local M = {}

M.min_rel_noise = 0.01 -- never trust a difference below 1% of the slower time

-- spread(t) -> half-width of the measured interval, in ms: (p90 - p10) / 2, capped at twice the
-- jitter below the median. Interference (preemption, other jobs) only ever adds time, so a long
-- upper tail measures the machine rather than the kernel; on a loaded CPU the p90 can be 3x the
-- median and would otherwise hide a 2x gain.
function M.spread(t)
  if type(t) ~= "table" or not t.median then return 0 end
  if t.p10 and t.p90 then
    return math.max(0, math.min((t.p90 - t.p10) / 2, 2 * (t.median - t.p10)))
  end
  return 0
end

-- better(a, b[, min_rel]) -> true when a's median beats b's by more than the noise of both and
-- by more than min_rel (default 1%) of the slower time.
function M.better(a, b, min_rel)
  if not (a and a.median) then return false end
  if not (b and b.median) then return true end
  local noise = math.max(M.spread(a), M.spread(b), (min_rel or M.min_rel_noise) * math.max(a.median, b.median))
  return b.median - a.median > noise
end

local function by_median(list)
  local out = {}
  for i, it in ipairs(list) do out[i] = it end
  table.sort(out, function(a, b)
    if a.time.median ~= b.time.median then return a.time.median < b.time.median end
    return (a.seq or 0) < (b.seq or 0)
  end)
  return out
end

-- rank(incumbents, newcomers) -> one array, fastest first. Each list is ordered by median; when
-- merging, a newcomer goes ahead of the next incumbent only if it is clearly better (beyond the
-- noise of both), so noise never evicts a kernel already held. Items have .time = {median, p10, p90}.
function M.rank(incumbents, newcomers)
  local a, b = by_median(incumbents or {}), by_median(newcomers or {})
  local out, i, j = {}, 1, 1
  while i <= #a or j <= #b do
    local p, c = a[i], b[j]
    if p and (not c or not M.better(c.time, p.time)) then
      out[#out + 1] = p; i = i + 1
    else
      out[#out + 1] = c; j = j + 1
    end
  end
  return out
end

-- identity(k) -> what makes two kernels the same: the evaluator's fingerprint, else the source
-- hash (agents/search/attempt.lua, key)
local function identity(k) return k.fingerprint or k.source_hash end

-- distinct(items) -> items with duplicate fingerprints removed (first occurrence kept, so rank
-- first to keep the fastest copy).
function M.distinct(items)
  local seen, out = {}, {}
  for _, it in ipairs(items) do
    local fp = identity(it) or it.code_hash
    if not fp or not seen[fp] then
      if fp then seen[fp] = true end
      out[#out + 1] = it
    end
  end
  return out
end

-- next_beam(beam, children, n) -> the n best distinct kernels among the old beam and the
-- successful children. A child that failed, or whose fingerprint equals a kernel already held,
-- never enters: a parent is never returned as a child's success.
function M.next_beam(beam, children, n)
  -- the first kernel with a fingerprint owns it: incumbents, then children in creation order
  local seen, held, fresh = {}, {}, {}
  for _, k in ipairs(beam) do
    local fp = identity(k)
    if not (fp and seen[fp]) then if fp then seen[fp] = true end; held[#held + 1] = k end
  end
  local kids = {}
  for _, c in ipairs(children) do
    if c.ok and c.time and c.time.median then kids[#kids + 1] = c end
  end
  table.sort(kids, function(a, b) return (a.seq or 0) < (b.seq or 0) end)
  for _, c in ipairs(kids) do
    local fp = identity(c)
    if not (fp and seen[fp]) then if fp then seen[fp] = true end; fresh[#fresh + 1] = c end
  end
  local kept = M.rank(held, fresh)
  local out = {}
  for i = 1, math.min(n, #kept) do out[i] = kept[i] end
  return out
end

return M
