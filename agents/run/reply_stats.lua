-- How usable the model's replies were, per role: a run on a sloppy model must say so, not quietly
-- run on rules. Counted by run.ask (agents/run/chat.lua) and the roles that take directions;
-- shown by summary.json (`replies`), the status line and report.html; carried across --resume
-- (state.json).
--   used      the reply was read as it came
--   repaired  it was read after a fix (sloppy JSON, renamed keys, class Model, a diff, a reply
--             cut at the length limit and continued, a prompt shortened after a context error)
--   reasked   the first reply was unusable; the answer to the re-ask (the error quoted) was used
--   lost      no usable answer after the re-ask: a failed reply (not a kernel failure)
--   continued, shortened: the extra calls made to repair (a continuation, a shortened prompt)
-- Directions (what a parent's workers try) come from the model or, when it gave none that could
-- be used, from the skills' rules: both are counted per role.
local M = {}
M.__index = M

M.OUTCOMES = { "used", "repaired", "reasked", "lost" }
M.EXTRA = { "continued", "shortened" }
-- share of directions from rules above which a run says so on its last line (--rules-warn)
M.DEFAULT_WARN = 0.5

local function role_entry()
  return { used = 0, repaired = 0, reasked = 0, lost = 0, continued = 0, shortened = 0,
    directions_model = 0, directions_rules = 0 }
end

-- new(saved) -> stats, continuing the counts of saved (summary() of an earlier process), if any
function M.new(saved)
  local self = setmetatable({ roles = {} }, M)
  for role, e in pairs(type(saved) == "table" and saved.by_role or {}) do
    local mine = self:entry(role)
    for k in pairs(mine) do mine[k] = tonumber(e[k]) or 0 end
  end
  return self
end

function M:entry(role)
  role = tostring(role or "?")
  local e = self.roles[role]
  if not e then
    e = role_entry()
    self.roles[role] = e
  end
  return e
end

-- add(role, what[, n]): what is an outcome or continued/shortened
function M:add(role, what, n)
  local e = self:entry(role)
  e[what] = (e[what] or 0) + (n or 1)
end

-- directions(role, from_model, from_rules): directions handed to workers and where they came from
function M:directions(role, model, rules)
  local e = self:entry(role)
  e.directions_model = e.directions_model + (model or 0)
  e.directions_rules = e.directions_rules + (rules or 0)
end

-- totals() -> {used, repaired, reasked, lost, continued, shortened, replies, directions_model,
-- directions_rules, rules_share (nil when there were no directions)}
function M:totals()
  local t = role_entry()
  for _, e in pairs(self.roles) do
    for k in pairs(t) do t[k] = t[k] + e[k] end
  end
  t.replies = t.used + t.repaired + t.reasked + t.lost
  local d = t.directions_model + t.directions_rules
  t.rules_share = d > 0 and t.directions_rules / d or nil
  return t
end

-- summary() -> what summary.json and state.json hold: {by_role = {role = counts}, totals}
function M:summary()
  local by = {}
  for role, e in pairs(self.roles) do
    local c = {}
    for k, v in pairs(e) do c[k] = v end
    by[role] = c
  end
  return { by_role = by, totals = self:totals() }
end

-- status() -> the status line's part ("replies 12 (2 repaired, 1 re-asked, 1 lost) rules 25%"),
-- or nil before the first reply
function M:status()
  local t = self:totals()
  if t.replies == 0 and t.directions_rules == 0 then return nil end
  local parts = {}
  if t.repaired > 0 then parts[#parts + 1] = t.repaired .. " repaired" end
  if t.reasked > 0 then parts[#parts + 1] = t.reasked .. " re-asked" end
  if t.lost > 0 then parts[#parts + 1] = t.lost .. " lost" end
  local s = "replies " .. t.replies .. (#parts > 0 and (" (" .. table.concat(parts, ", ") .. ")") or "")
  if t.rules_share and t.directions_rules > 0 then s = s .. string.format(" rules %.0f%%", 100 * t.rules_share) end
  return s
end

-- warning(summary, limit) -> the last line's warning when more than `limit` (a share, 0..1) of
-- the run's directions came from rules, else nil. summary: summary() (or summary.json's replies).
function M.warning(s, limit)
  local t = type(s) == "table" and s.totals
  if not t or not t.rules_share or t.rules_share <= (limit or M.DEFAULT_WARN) then return nil end
  return string.format("WARNING: %d of %d directions (%.0f%%) came from the skills' rules, not the model "
    .. "(its replies: %d used, %d repaired, %d re-asked, %d lost); this was mostly a rule-driven run",
    t.directions_rules, t.directions_rules + t.directions_model, 100 * t.rules_share,
    t.used, t.repaired, t.reasked, t.lost)
end

return M
