-- The run's watch over its LLM: every call a role makes (run.chat) goes through it.
--   * A call that failed (after the LLM layer's own retries) with a failure that may pass with
--     time (server down, overloaded, stalled, cut off) is tried again by its worker after
--     --llm-backoff seconds, then twice that. A reply too large (ETOOBIG) is not: the same
--     request would bring it again; it is a failed reply (the LLM answered), which the asking
--     loop counts and re-asks once (agents/run/ask.lua), not a failure of the LLM.
--   * --llm-failures calls failing in a row mean the LLM is down: no call is made after that,
--     and the driver stops the run (exit 3) so that --resume can continue it later.
--   * A refused API key (EAUTH), or a model or URL the server does not have (ENOTFOUND, HTTP 404),
--     stops it at the first such call (exit 2: the key, model or URL is to be fixed, then --resume
--     continues): no later call can pass, so it is no outage.
--   * Failed calls are counted by code for summary.json and the status line; streamed replies
--     give the decoding rate (tokens per second) the status line shows.
-- An LLM failure is never a kernel's: the attempt it ends is recorded as `llm_error`
-- (agents/search/attempt.lua), with no lesson, skill outcome or reflexion.
local log = require("kagent.log")
local task = require("kagent.task")

local M = {}
M.__index = M

-- failures that may pass with time
M.TRANSIENT = { ETIMEDOUT = true, ECONNECT = true, EHTTP = true, ERATELIMIT = true, EPARSE = true }
-- not failures of the LLM: the budget is spent (a stop rule), the call was canceled (its task
-- ended), a strict replay had no recorded answer (nothing was sent; the run lists it and exits 4)
M.NOT_FAILURES = { EBUDGET = true, ECANCELED = true, EREPLAY = true }
-- failed replies, not failures of the LLM: it answered, too much (over --max-reply-bytes, or the
-- LLM layer's max_body). They count toward no --llm-failures, and end a run of failed calls.
M.REPLY_FAILURES = { ETOOBIG = true }
-- failures no later call can pass: the provider refused the API key, or has no such model or
-- URL. The first one brings the LLM down at once (and says so), instead of --llm-failures calls
-- in a row.
M.FATAL = { EAUTH = true, ENOTFOUND = true }
-- tries of a failed call after the first
M.RETRIES = 2

-- new{limit, backoff, failures, by_code, sleep} -> guard. failures/by_code: counts carried over
-- from earlier processes of the run (state.json); sleep: task.sleep unless a test passes its own.
function M.new(o)
  o = o or {}
  local by_code = {}
  for k, v in pairs(o.by_code or {}) do by_code[k] = v end
  return setmetatable({ limit = o.limit or 6, backoff = o.backoff or 5, sleep = o.sleep or task.sleep,
    consecutive = 0, failures = o.failures or 0, by_code = by_code, streamed = false }, M)
end

-- record(ok, code, err): one call's end
function M:record(ok, code, err)
  if ok or M.REPLY_FAILURES[code] then self.consecutive = 0; return end
  if M.NOT_FAILURES[code] then return end
  code = code or "EUNKNOWN"
  self.consecutive = self.consecutive + 1
  self.failures = self.failures + 1
  self.by_code[code] = (self.by_code[code] or 0) + 1
  self.last_error, self.last_code = tostring(err), code
  if M.FATAL[code] and not self.down then
    self.down, self.fatal = tostring(err):gsub("^%u+: ", ""), code
    -- the provider's words are said once, when the run stops (agents/run/exit.lua)
    log.error("the provider %s (%s); the run stops once the workers in flight are done",
      code == "EAUTH" and "refused the API key" or "has no such model or URL", code)
  elseif self.consecutive >= self.limit and not self.down then
    self.down = string.format("%d LLM calls failed in a row (the last: %s)", self.consecutive, self.last_error)
    log.error("the LLM is down: %s; the run stops once the workers in flight are done", self.down)
  end
end

-- call(fn, what) -> fn's results. fn() -> result | nil, "CODE: message", "CODE". Once the LLM
-- is down, fn is not called: the answer is the failure that brought it down.
function M:call(fn, what)
  local res, err, code, info
  for try = 0, M.RETRIES do
    if self.down then
      return nil, self.last_code .. ": not called: the run is stopping (" .. (self.fatal and "the provider refused the call"
        or "the LLM is down") .. ")", self.last_code
    end
    res, err, code, info = fn()
    self:record(res ~= nil, code, err)
    if res or self.down or not M.TRANSIENT[code] or try == M.RETRIES then break end
    local wait = self.backoff * 2 ^ try * (0.5 + 0.5 * math.random())
    log.warn("LLM %s call failed (%s); trying it again in %.1f s", what or "?", tostring(err), wait)
    self.sleep(wait)
  end
  return res, err, code, info
end

-- worst_case_s{limit, backoff, llm} -> seconds: the longest a run takes to stop on a dead
-- provider with these settings (limit: --llm-failures, backoff: --llm-backoff, llm: kagent.llm's
-- DEFAULTS or the same fields), one worker asking at a time (more workers fail together, sooner).
-- Each failed call costs the longest of its ways to fail: no headers within `start` (a stream
-- request accepted and never answered), no connection within `connect`, or refused connections
-- and 5xx replies retried `retries` times with the call's backoff; calls are tried again after
-- this guard's backoff, then twice that, and every try counts toward the limit.
function M.worst_case_s(o)
  local l = o.llm
  local retried = 0
  for k = 1, l.retries do retried = retried + math.min(l.backoff.max, l.backoff.base * 2 ^ (k - 1)) end
  local per_call = math.max(l.start, l.connect, retried)
  local total = 0
  for i = 1, o.limit do
    total = total + per_call
    local try = (i - 1) % (M.RETRIES + 1)  -- this call's try: 0 first, M.RETRIES last
    if i < o.limit and try < M.RETRIES then total = total + o.backoff * 2 ^ try end
  end
  return total
end

-- summary() -> {calls, by_code} for summary.json and state.json
function M:summary()
  local by = {}
  for k, v in pairs(self.by_code) do by[k] = v end
  return { calls = self.failures, by_code = by }
end

return M
