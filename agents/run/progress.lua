-- One progress line on stderr: elapsed time, phase (baselines, round k/n, confirmation), an
-- estimate of the time left once a round has ended, busy workers, best time and speedups,
-- tokens (and the decoding rate when replies stream), cost, LLM calls that failed, and how usable
-- the replies were.
-- On a terminal it is kagent.log's status line: log lines pass above it, and it is redrawn every
-- second so the elapsed time moves. Elsewhere (a pipe, a log file, TERM=dumb,
-- KAGENT_PROGRESS=lines) it is one plain line per change of phase, workers or best.
local log = require("kagent.log")
local ktime = require("kagent.time")
local M = {}
M.__index = M

function M.new(opts)
  opts = opts or {}
  local out = opts.out or io.stderr
  local tty = out == io.stderr and kagent.fs.isatty(2) and os.getenv("TERM") ~= "dumb"
    and os.getenv("KAGENT_PROGRESS") ~= "lines"
  return setmetatable({ rounds = opts.rounds or 0, round = 0, busy = 0, workers = 0, tty = tty,
    out = out, last = "", usage = opts.usage, t0 = opts.t0 or ktime.now(), now = opts.now or ktime.now }, M)
end

-- clock(s) -> "42s", "3m05s", "1h02m"
function M.clock(s)
  s = math.max(0, math.floor(s + 0.5))
  if s < 60 then return s .. "s" end
  if s < 3600 then return string.format("%dm%02ds", math.floor(s / 60), s % 60) end
  return string.format("%dh%02dm", math.floor(s / 3600), math.floor(s % 3600 / 60))
end

-- estimate(s, now) -> seconds left, or nil: the mean time of the rounds that ended, times the
-- rounds to go, less what the current round has taken (the confirmation is not included)
function M.estimate(s, now)
  local done = (s.round or 0) - 1
  if not (s.round_t0 and s.rounds1_t0) or done < 1 or not s.rounds or s.rounds < s.round then return nil end
  local per = (s.round_t0 - s.rounds1_t0) / done
  return math.max(0, per * (s.rounds - s.round + 1) - (now - s.round_t0))
end

-- where(s) -> the phase: a named one ("baselines", "confirmation", "generate"), else the round
local function where(s)
  if s.phase then return s.phase end
  return string.format("round %d/%d", s.round or 0, s.rounds or 0)
end

function M.format(s, now)
  local best = "best -"
  if s.best_ms then
    best = string.format("best %.4f ms", s.best_ms)
    if s.speedup_eager then best = best .. string.format(" %.2fx eager", s.speedup_eager) end
    if s.speedup_compile then best = best .. string.format(" %.2fx compile", s.speedup_compile) end
    if s.sol_pct then best = best .. string.format(" SOL %.0f%%", s.sol_pct) end
  end
  local tok = s.tokens or 0
  local toks = tok >= 1000 and string.format("%.1fk", tok / 1000) or tostring(tok)
  if s.tokens_per_s then toks = toks .. string.format(" (%.0f tok/s)", s.tokens_per_s) end
  local head = "[" .. where(s)
  if now and s.t0 then
    head = head .. " " .. M.clock(now - s.t0)
    local left = not s.phase and M.estimate(s, now)
    if left then head = head .. ", ~" .. M.clock(left) .. " left" end
  end
  local line = string.format("%s] workers %d/%d busy | %s | tokens %s | $%.4f",
    head, s.busy or 0, s.workers or 0, best, toks, s.cost_usd or 0)
  if (s.llm_failures or 0) > 0 then line = line .. string.format(" | LLM failures %d", s.llm_failures) end
  -- how usable the model's replies were (agents/run/reply_stats.lua): "replies 12 (1 re-asked) rules 25%"
  if s.replies then line = line .. " | " .. s.replies end
  return line
end

-- the fields whose change is worth a line in a log (not elapsed time or token ticks)
local function key(s)
  return M.format({ phase = s.phase, round = s.round, rounds = s.rounds, busy = s.busy, workers = s.workers,
    best_ms = s.best_ms, speedup_eager = s.speedup_eager, speedup_compile = s.speedup_compile, sol_pct = s.sol_pct,
    llm_failures = s.llm_failures, replies = s.replies })
end

-- A terminal's line is redrawn every second so the clock moves between updates.
function M:_tick()
  if self.ticker then return end
  local task = require("kagent.task")
  self.ticker = task.spawn({ name = "progress", fn = function()
    while true do
      task.sleep(1)
      self:update()
    end
  end })
end

-- update(fields): merge fields (false clears one, e.g. phase = false) and show the line if it
-- changed.
function M:update(fields)
  for k, v in pairs(fields or {}) do
    if v == false and k == "phase" then self[k] = nil else self[k] = v end
  end
  if fields and fields.round and fields.round ~= self.shown_round then
    self.shown_round = fields.round
    self.round_t0 = self.now()
    if fields.round == 1 then self.rounds1_t0 = self.round_t0 end
  end
  if self.usage then
    local u = self.usage()
    if u then self.tokens = u.tokens or self.tokens; self.cost_usd = u.cost_usd or self.cost_usd end
  end
  if self.tty then
    local line = M.format(self, self.now())
    if line == self.last then return end
    self.last = line
    log.status(line)
    self:_tick()
    return
  end
  local k = key(self)
  if k == self.last_key then return end
  self.last_key = k
  self.out:write(M.format(self, self.now()) .. "\n")
  self.out:flush()
end

-- finish(msg): the status line goes (its ticker with it) and msg, if any, is printed.
function M:finish(msg)
  if self.ticker then
    require("kagent.task").kill(self.ticker)
    self.ticker = nil
  end
  if self.tty then log.status(""); self.last = "" end
  if msg then self.out:write(msg .. "\n") end
  self.out:flush()
end

return M
