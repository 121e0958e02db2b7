-- One progress line on stderr: round, busy workers, best time and speedups, tokens (and the
-- decoding rate when replies stream), cost, LLM calls that failed, and how usable the replies were.
-- Rewritten in place on a terminal, one line per update otherwise (logs stay readable).
local M = {}
M.__index = M

function M.new(opts)
  opts = opts or {}
  local out = opts.out or io.stderr
  -- Rewrite in place only on a real terminal (stderr), so logs and pipes get plain lines.
  local tty = out == io.stderr and kagent.fs.isatty(2) and os.getenv("TERM") ~= "dumb"
    and os.getenv("KAGENT_PROGRESS") ~= "lines"
  return setmetatable({ rounds = opts.rounds or 0, round = 0, busy = 0, workers = 0, tty = tty,
    out = out, last = "", usage = opts.usage }, M)
end

function M.format(s)
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
  -- a phase name (e.g. "generate") replaces the round counter while no round runs
  local where = s.phase and ("[" .. s.phase .. "]") or string.format("[round %d/%d]", s.round or 0, s.rounds or 0)
  local line = string.format("%s workers %d/%d busy | %s | tokens %s | $%.4f",
    where, s.busy or 0, s.workers or 0, best, toks, s.cost_usd or 0)
  if (s.llm_failures or 0) > 0 then line = line .. string.format(" | LLM failures %d", s.llm_failures) end
  -- how usable the model's replies were (agents/lib/reply_stats.lua): "replies 12 (1 re-asked) rules 25%"
  if s.replies then line = line .. " | " .. s.replies end
  return line
end

-- update(fields): merge fields and print if the line changed.
function M:update(fields)
  for k, v in pairs(fields or {}) do self[k] = v end
  if self.usage then
    local u = self.usage()
    if u then self.tokens = u.tokens or self.tokens; self.cost_usd = u.cost_usd or self.cost_usd end
  end
  local line = M.format(self)
  if line == self.last then return end
  self.last = line
  -- in a log, token ticks alone are noise: print when round, workers or best change
  if not self.tty then
    local key = M.format({ phase = self.phase, round = self.round, rounds = self.rounds, busy = self.busy, workers = self.workers,
      best_ms = self.best_ms, speedup_eager = self.speedup_eager, speedup_compile = self.speedup_compile, sol_pct = self.sol_pct,
      llm_failures = self.llm_failures, replies = self.replies })
    if key == self.last_key then return end
    self.last_key = key
  end
  if self.tty then self.out:write("\r\27[K" .. line) else self.out:write(line .. "\n") end
  self.out:flush()
end

function M:finish(msg)
  if self.tty then self.out:write("\n") end
  if msg then self.out:write(msg .. "\n") end
  self.out:flush()
end

return M
