-- One progress line on stderr: elapsed time, phase (baselines, round k/n, confirmation), an
-- estimate of the time left once a round has ended, busy workers, best time and speedups,
-- tokens (and the decoding rate when replies stream), cost, LLM calls that failed, and how usable
-- the replies were.
-- On a terminal it is kagent.log's status line: log lines pass above it, and it is redrawn every
-- second (opts.tick_s) so the elapsed time moves, and at once when the terminal is resized
-- (SIGWINCH, kagent.fs.wait_resize); it is cut to the terminal's width by dropping whole fields,
-- least useful first (DROP below). Elsewhere (a pipe, a log file, TERM=dumb,
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
    out = out, last = "", usage = opts.usage, t0 = opts.t0 or ktime.now(), now = opts.now or ktime.now,
    tick_s = opts.tick_s or 1 }, M)
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

-- Each field of the line with the rank at which it is dropped when the line is wider than the
-- terminal: the lowest rank goes first. Least useful first: the decoding rate, reply stats, cost,
-- tokens, SOL, the compile speedup, the time-left estimate, busy workers; LLM failures, the eager
-- speedup and the best time stay longest, and the phase is never dropped.
local DROP = { rate = 1, replies = 2, cost = 3, tokens = 4, sol = 5, compile = 6, left = 7, clock = 8,
  workers = 9, failures = 10, eager = 11, best = 12 }

-- parts_of(s, now) -> the line as a list of { text, sep (what joins it to the field before), rank }
local function parts_of(s, now)
  local out = {}
  local function add(text, sep, rank) out[#out + 1] = { text = text, sep = sep, rank = rank } end
  add("[" .. where(s), "", math.huge)
  if now and s.t0 then
    add(M.clock(now - s.t0), " ", DROP.clock)
    local left = not s.phase and M.estimate(s, now)
    if left then add("~" .. M.clock(left) .. " left", ", ", DROP.left) end
  end
  add("]", "", math.huge)
  add(string.format("workers %d/%d busy", s.busy or 0, s.workers or 0), " ", DROP.workers)
  if s.best_ms then
    add(string.format("best %.4f ms", s.best_ms), " | ", DROP.best)
    if s.speedup_eager then add(string.format("%.2fx eager", s.speedup_eager), " ", DROP.eager) end
    if s.speedup_compile then add(string.format("%.2fx compile", s.speedup_compile), " ", DROP.compile) end
    if s.sol_pct then add(string.format("SOL %.0f%%", s.sol_pct), " ", DROP.sol) end
  else
    add("best -", " | ", DROP.best)
  end
  local tok = s.tokens or 0
  add("tokens " .. (tok >= 1000 and string.format("%.1fk", tok / 1000) or tostring(tok)), " | ", DROP.tokens)
  if s.tokens_per_s then add(string.format("(%.0f tok/s)", s.tokens_per_s), " ", DROP.rate) end
  add(string.format("$%.4f", s.cost_usd or 0), " | ", DROP.cost)
  if (s.llm_failures or 0) > 0 then add(string.format("LLM failures %d", s.llm_failures), " | ", DROP.failures) end
  -- how usable the model's replies were (agents/run/reply_stats.lua): "replies 12 (1 re-asked) rules 25%"
  if s.replies then add(s.replies, " | ", DROP.replies) end
  return out
end

-- columns(text) -> how many terminal columns text takes (UTF-8 continuation bytes take none)
local function columns(text)
  return #text - select(2, text:gsub("[\128-\191]", ""))
end

-- join(parts) -> the line of the fields not dropped; after the "]" a field starts with a space
local function join(parts)
  local buf, last = {}, nil
  for _, p in ipairs(parts) do
    if not p.dropped then
      buf[#buf + 1] = (last == "]" and p.sep == " | ") and " " or p.sep
      buf[#buf + 1] = p.text
      last = p.text
    end
  end
  return table.concat(buf)
end

-- format(s, now[, width]) -> the status line; with a width (the terminal's columns) fields are
-- dropped, least useful first, until it fits, and only a line whose phase alone is too wide is cut.
function M.format(s, now, width)
  local parts = parts_of(s, now)
  local line = join(parts)
  if not width then return line end
  local order = {}
  for i, p in ipairs(parts) do if p.rank ~= math.huge then order[#order + 1] = i end end
  table.sort(order, function(a, b) return parts[a].rank < parts[b].rank end)
  local k = 0
  while columns(line) > width and k < #order do
    k = k + 1
    parts[order[k]].dropped = true
    line = join(parts)
  end
  if columns(line) > width then line = line:sub(1, width) end
  return line
end

-- the fields whose change is worth a line in a log (not elapsed time or token ticks)
local function key(s)
  return M.format({ phase = s.phase, round = s.round, rounds = s.rounds, busy = s.busy, workers = s.workers,
    best_ms = s.best_ms, speedup_eager = s.speedup_eager, speedup_compile = s.speedup_compile, sol_pct = s.sol_pct,
    llm_failures = s.llm_failures, replies = s.replies })
end

-- A terminal's line is redrawn every tick_s seconds (1 by default) so the clock moves between
-- updates, and at once when the terminal is resized, at its new width.
function M:_tick()
  if self.ticker then return end
  local task = require("kagent.task")
  self.ticker = task.spawn({ name = "progress", fn = function()
    while true do
      task.sleep(self.tick_s)
      self:update()
    end
  end })
  local seen = kagent.fs.resizes()  -- now: a resize before the task first waits still counts
  self.resizer = task.spawn({ name = "progress-resize", fn = function()
    while true do
      seen = kagent.fs.wait_resize(seen)
      self.last = nil  -- the same text at another width is drawn again
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
    -- the width is read at every redraw: at each tick, and at once on a resize (SIGWINCH, the
    -- resizer task); one column is left free: a line as wide as the terminal puts the cursor past
    -- its edge, and some terminals then wrap it and leave a copy behind at each redraw
    local cols = kagent.fs.term_columns(2)
    local line = M.format(self, self.now(), cols and math.max(cols - 1, 1))
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
  for _, k in ipairs({ "ticker", "resizer" }) do
    if self[k] then
      require("kagent.task").kill(self[k])
      self[k] = nil
    end
  end
  if self.tty then log.status(""); self.last = "" end
  if msg then self.out:write(msg .. "\n") end
  self.out:flush()
end

return M
