-- kagent.llm: chat calls to Anthropic, OpenAI and OpenAI-compatible servers, concurrent (one
-- task per call, a semaphore per provider), whole or streamed, retried with backoff within a
-- per-call deadline, accounted against budgets, and recordable/replayable. This file is the call
-- itself; the parts, one job each, are in kagent/llm/:
--   config.lua      configure{} and the environment: provider, model, server, key, timeouts
--   accounting.lua  usage totals, prices, budgets
--   record.lua      record/replay: request keys and the store of replies
--   served.lua      the models a server lists, and the check before any work (check())
--   transport.lua   the HTTP side of one attempt, and the retries
--   anthropic.lua, openai.lua   the providers' formats
local json = require("kagent.json")
local task = require("kagent.task")
local log = require("kagent.log")
local clock = require("kagent.time")
local extract = require("kagent.llm.extract")
local config = require("kagent.llm.config")
local accounting = require("kagent.llm.accounting")
local record = require("kagent.llm.record")
local served = require("kagent.llm.served")
local timeouts = require("kagent.llm.timeouts")
local transport = require("kagent.llm.transport")

local M = {}

local cfg, env, positive = config.cfg, config.env, config.positive
local settings, resolve, call_limits = config.settings, config.resolve, config.call_limits
local cache_mode = config.cache_mode

M.DEFAULTS = config.DEFAULTS
--- What configured() answers when nothing at all is configured (no key, URL or model).
M.NOT_CONFIGURED = config.NOT_CONFIGURED
--- cache_mode() -> the record/replay mode in force: "off" | "record" | "replay" | "auto"
--- (configure{cache}, else KAGENT_LLM_CACHE, else "off").
M.cache_mode = cache_mode

local semaphores = {}  -- "provider base URL" -> the semaphore of its concurrent requests

--- configure{model, base_url, api_key_env, cache, db, concurrency, retries, backoff, timeout,
--- idle_timeout, connect_timeout, start_timeout, stream, max_tokens, max_body, max_reply, prices, budget, reset}
--- -> true.
--- `timeout` may also be a string in the KAGENT_LLM_TIMEOUT form (it then sets what it names).
function M.configure(opts)
  if type(opts) ~= "table" then error("llm.configure: expected a table", 2) end
  if opts.reset then
    config.reset()
    semaphores = {}
    record.forget()
    accounting.forget_unpriced()
    served.forget()
  end
  config.configure(opts)
  if opts.db ~= nil then record.forget() end
  if opts.model or opts.base_url or opts.concurrency then semaphores = {} end
  return true
end

--- configured() ⏸ (only to ask a server its model when none is named) -> true, "provider:model" |
--- false, why, code (ENOTSUP, EAUTH, or the failure of asking the server). Whether the server
--- answers, takes the key and serves the model is check()'s question.
function M.configured()
  local set, serr, scode = settings()
  if not set then return false, (serr:gsub("^%u+: ", "")), scode end
  local r, err, code = resolve(nil)
  if not r then return false, (err:gsub("^%u+: ", "")), code end
  if not r.model then
    task._running_task("llm.configured")
    local ok, f = served.pick(r, call_limits(r, {}, set, nil, false))
    if not ok then return false, f.message, f.code end
  end
  return true, r.provider .. ":" .. r.model
end

--- check(models) ⏸ -> true | nil, "CODE: message", "CODE": before any work, one request per
--- server (its model list, GET {base}/models; Anthropic: GET /v1/models/{model}) tells whether it
--- answers, takes the key (EAUTH) and serves the configured model and each of `models` ("provider:
--- model" or bare names; ENOTFOUND, naming the models it lists or the /v1 the URL lacks). A server
--- that does not answer fails as a call would (ECONNECT, ETIMEDOUT, EHTTP), within a minute at
--- most. A strict replay sends nothing, so checks nothing.
function M.check(models)
  task._running_task("llm.check")
  if cache_mode() == "replay" then return true end
  local set, serr, scode = settings()
  if not set then return nil, serr, scode end
  local asked = {}
  for i = 0, #(models or {}) do
    local r, err, code = resolve(i > 0 and models[i] or nil)
    if not r then return nil, err, code end
    -- a model list comes at once or not at all: its wait is a stream's start, not a reply's
    local limits = call_limits(r, { timeout = math.min(set.timeout, 60) }, set, nil, false)
    limits.idle = math.min(limits.idle, set.start_timeout)
    if not r.model then
      local ok, f = served.pick(r, limits)
      if not ok then return nil, f.code .. ": " .. f.message, f.code end
    end
    local key = r.provider .. " " .. r.base .. " " .. r.model
    if not asked[key] then
      asked[key] = true
      local ok, f = served.check(r, limits)
      if not ok then return nil, f.code .. ": " .. f.message, f.code end
    end
  end
  return true
end

--- models() ⏸ -> the model ids the configured OpenAI-compatible server lists (GET /models), or
--- nil, "CODE: message", "CODE".
function M.models()
  task._running_task("llm.models")
  local set, serr, scode = settings()
  if not set then return nil, serr, scode end
  local r, err, code = resolve(nil)
  if not r then return nil, err, code end
  if r.provider ~= "openai" then
    return nil, "ENOTSUP: listing models needs an OpenAI-compatible server (KAGENT_LLM_URL)", "ENOTSUP"
  end
  local ids, f = served.models(r, call_limits(r, {}, set, nil, false))
  if not ids then return nil, f.code .. ": " .. f.message, f.code end
  local out = {}
  for i, id in ipairs(ids) do out[i] = id end
  return out
end

--- usage() -> run totals (a copy).
M.usage = accounting.usage
M.total_tokens = accounting.total_tokens
--- reset_usage(): the totals start again from zero.
M.reset_usage = accounting.reset

-- Attempts ------------------------------------------------------------------------------------------

local function semaphore_for(r)
  local k = r.provider .. " " .. r.base
  if not semaphores[k] then
    local n = cfg.concurrency or tonumber(env("KAGENT_LLM_CONCURRENCY") or "") or 256
    semaphores[k] = task.semaphore(n)
  end
  return semaphores[k]
end

-- One attempt of a chat call: a slot of the provider's semaphore, then the request, whole or
-- streamed -> parsed (with the attempt's timing) | nil, failure.
local function attempt(r, wire, limits, remaining, streaming, on_delta)
  local sem = semaphore_for(r)
  local t_wait = clock.now()
  if not sem:acquire(remaining) then
    return nil, transport.failure("ETIMEDOUT", string.format("waited %.1f s for a free request slot (the concurrency "
      .. "limit of %s) and the call's %g s timeout passed", clock.now() - t_wait, r.provider, limits.timeout), {})
  end
  remaining = remaining - (clock.now() - t_wait)
  local lim = { remaining = math.max(remaining, 0.001), connect = limits.connect, idle = limits.idle,
                start = limits.start, max_body = limits.max_body, max_reply = limits.max_reply }
  -- A killed task never reaches the release below; its kill hook gives the slot back and
  -- aborts a stream that was not parked on its transfer (e.g. killed inside on_token).
  local me = task.current()
  local prev_hook = me.on_kill
  me.on_kill = function()
    sem:release()
    if lim.stream then lim.stream:close() end
    if prev_hook then prev_hook() end
  end
  accounting.add("http_requests")
  local t0 = clock.now()
  local ok, parsed, f
  if streaming then
    ok, parsed, f = pcall(transport.post_stream, r, wire, lim, function(text, p) on_delta(text, p, t0) end)
  else
    ok, parsed, f = pcall(transport.post_whole, r, wire, lim)
  end
  me.on_kill = prev_hook
  sem:release()
  if lim.stream then lim.stream:close() end
  if not ok then error(parsed, 0) end -- misuse, an error in on_token, or a kill: not ours to swallow
  if parsed then parsed.t_start, parsed.t_end = t0, clock.now() end
  return parsed, f
end

-- Chat ----------------------------------------------------------------------------------------------

local function check_request(req)
  if type(req) ~= "table" then error("llm.chat: expected a table", 3) end
  if type(req.messages) ~= "table" or #req.messages == 0 then
    error("llm.chat: messages must be a non-empty array of {role, content}", 3)
  end
  for i, m in ipairs(req.messages) do
    if type(m) ~= "table" or (m.role ~= "user" and m.role ~= "assistant")
      or (type(m.content) ~= "string" and type(m.content) ~= "table") then
      error("llm.chat: messages[" .. i .. "] must be {role = 'user'|'assistant', content = string}", 3)
    end
  end
  if req.system ~= nil and type(req.system) ~= "string" and type(req.system) ~= "table" then
    error("llm.chat: system must be a string", 3)
  end
  if req.max_tokens ~= nil and (type(req.max_tokens) ~= "number" or req.max_tokens < 1) then
    error("llm.chat: max_tokens must be a positive number", 3)
  end
  for _, k in ipairs({ "timeout", "idle_timeout" }) do
    if req[k] ~= nil and not positive(req[k]) then error("llm.chat: " .. k .. " must be a number of seconds > 0", 3) end
  end
  if req.stream ~= nil and type(req.stream) ~= "boolean" then error("llm.chat: stream must be a boolean", 3) end
  if req.on_token ~= nil and type(req.on_token) ~= "function" then error("llm.chat: on_token must be a function", 3) end
  if req.replay_key ~= nil and (type(req.replay_key) ~= "string" or req.replay_key == "") then
    error("llm.chat: replay_key must be a non-empty string", 3)
  end
end

-- Follows a call's streamed deltas: the progress table handed to on_token (one per call; an
-- attempt that starts over resets it) and the time of the attempt's first delta.
local function tracker(on_token)
  local st = { prog = { attempt = 0, chars = 0, tokens = 0, elapsed = 0 } }
  function st.delta(k, text, p, t0)
    local now, prog = clock.now(), st.prog
    if k ~= prog.attempt then
      prog.attempt, prog.chars, prog.tokens, prog.first_token_s, prog.tokens_per_s = k, 0, 0, nil, nil
      st.t_first = nil
    end
    if not st.t_first then
      st.t_first = now
      prog.first_token_s = now - t0
    end
    prog.chars = prog.chars + #text
    prog.tokens = p and p.tokens() or math.ceil(prog.chars / 4)
    prog.elapsed = now - t0
    local gen = now - st.t_first
    prog.tokens_per_s = (gen > 0 and prog.tokens > 1) and (prog.tokens - 1) / gen or nil
    if on_token then on_token(text, prog) end
  end
  return st
end

-- The result table of a call, accounted. `first` is the time of the first streamed delta of the
-- attempt that succeeded (nil for a whole reply or a replay).
local function result_of(r, parsed, t0, attempts, cached, first)
  local u = parsed.usage
  local cost, priced = accounting.cost_of(r, u)
  local first_token_s, tokens_per_s, gen_tokens, gen_seconds
  if not cached then
    -- Streamed: the decoding rate after the first token. Whole: output over the attempt's time.
    if first then
      first_token_s = first - parsed.t_start
      gen_tokens, gen_seconds = u.output_tokens - 1, parsed.t_end - first
    else
      gen_tokens, gen_seconds = u.output_tokens, parsed.t_end - parsed.t_start
    end
    if gen_tokens > 0 and gen_seconds > 0 then
      tokens_per_s = gen_tokens / gen_seconds
    else
      gen_tokens, gen_seconds = nil, nil
    end
  end
  accounting.account(r.model, u, cost, gen_tokens, gen_seconds, priced)
  if parsed.truncated then
    log.warn("llm: %s %s reply stopped at max_tokens (%d output tokens)", r.provider, r.model, u.output_tokens)
  end
  return {
    text = parsed.text, usage = u, cost_usd = cost, priced = priced, model = r.model, provider = r.provider,
    latency = clock.now() - t0, cached = cached, attempts = attempts,
    stop_reason = parsed.stop_reason, truncated = parsed.truncated == true,
    streamed = first ~= nil, first_token_s = first_token_s, tokens_per_s = tokens_per_s,
    usage_estimated = parsed.usage_estimated == true,
  }
end

-- A failed call: counted, and returned as nil, "CODE: message", "CODE", info.
local function fail(code, message, f, r)
  accounting.failed(code)
  f = f or {}
  local info = { code = code, message = message, status = f.status, server_error = f.server_error,
                 attempts = f.attempts or 0, elapsed = f.elapsed or 0, retryable = f.retryable == true,
                 provider = r and r.provider, model = r and r.model }
  return nil, code .. ": " .. message, code, info
end

local function fail_text(err, code, r)
  return fail(code, (err:gsub("^%u+: ", "")), nil, r)
end

--- chat{messages, system, model, max_tokens, temperature, top_p, stop, reasoning_effort,
--- thinking_tokens, timeout, idle_timeout, retries, stream, on_token, extra, tag, replay_key} ⏸
--- -> result | nil, "CODE: message", "CODE", info.
function M.chat(req)
  check_request(req)
  task._running_task("llm.chat")
  local t0 = clock.now()
  local set, serr, scode = settings()
  if not set then return fail_text(serr, scode) end
  local r, err, code = resolve(req.model)
  if not r then return fail_text(err, code) end
  local berr = accounting.budget_error()
  if berr then return fail_text(berr, "EBUDGET", r) end
  local streaming = req.stream
  if streaming == nil then streaming = set.stream end
  if not r.model then
    local ok, f = served.pick(r, call_limits(r, req, set, nil, false, t0))
    if not ok then return fail(f.code, f.message, f, r) end
  end
  local body = r.prov.body(req, r.model, req.max_tokens or cfg.max_tokens)
  if req.extra then
    for k, v in pairs(req.extra) do body[k] = v end
  end
  -- The record key and the stored request: the body without the stream fields, so a record
  -- replays whether it was made streaming or not.
  local body_text = json.encode(body)
  local mode = cache_mode()
  local key, store
  if mode ~= "off" then
    key = record.key(r, req.replay_key, body_text)
    local serr2, scode2
    store, serr2, scode2 = record.store(cfg.db)
    if not store then return fail_text(serr2, scode2, r) end
    if mode == "replay" or mode == "auto" then
      local parsed = record.replayed(store, key)
      if parsed and cfg.max_reply and #(parsed.text or "") > cfg.max_reply then
        -- recorded under a larger limit: refused as a live reply would be
        local f = transport.too_big(#parsed.text, cfg.max_reply)
        return fail(f.code, f.message, f, r)
      end
      if parsed then
        accounting.add("replayed")
        local res = result_of(r, parsed, t0, 0, true)
        if req.on_token then
          req.on_token(res.text, { attempt = 0, chars = #res.text, tokens = res.usage.output_tokens, elapsed = 0 })
        end
        return res
      end
      if mode == "replay" then
        accounting.add("replay_misses")
        return fail("EREPLAY", "no recorded reply for this request (key " .. key:sub(1, 16) .. ", "
          .. r.provider .. ":" .. r.model .. ")", nil, r)
      end
    end
  end
  local limits = call_limits(r, req, set, body, streaming, t0)
  if streaming then r.prov.stream_body(body) end
  local wire = streaming and json.encode(body) or body_text
  local track = tracker(req.on_token)
  local ctx = { what = r.provider .. " " .. r.model, retries = limits.retries, backoff = cfg.backoff,
                deadline = limits.deadline, timeout = limits.timeout,
                on_retry = function() accounting.add("retries") end }
  local parsed, f = transport.run(ctx, function(k, remaining)
    return attempt(r, wire, limits, remaining, streaming, function(text, p, ta) track.delta(k, text, p, ta) end)
  end)
  if not parsed then
    if f.code == "ENOTFOUND" and r.compat then served.add_to_failure(r, f) end
    return fail(f.code, f.message, f, r)
  end
  local attempts = f
  local first = streaming and track.prog.attempt == attempts and track.t_first or nil
  -- A stream whose server reported no usage: count the output tokens it streamed.
  if streaming and not parsed.usage_reported and parsed.usage.output_tokens == 0 and track.prog.tokens > 0 then
    parsed.usage.output_tokens = track.prog.tokens
    parsed.usage_estimated = true
  end
  if key then record.save(store, key, body_text, parsed, req.tag) end
  local res = result_of(r, parsed, t0, attempts, false, first)
  if req.on_token and not streaming then
    -- A whole reply reaches on_token once (a stream that the server sent whole already did).
    req.on_token(res.text, { attempt = attempts, chars = #res.text, tokens = res.usage.output_tokens,
                             elapsed = parsed.t_end - parsed.t_start, tokens_per_s = res.tokens_per_s })
  end
  return res
end

--- parse_timeout(text) -> {timeout, idle_timeout, connect_timeout} (the parts given) or nil, why.
--- The form of KAGENT_LLM_TIMEOUT, for scripts' own options (e.g. --llm-timeout).
M.parse_timeout = timeouts.parse
M.TIMEOUT_FORMAT = timeouts.FORMAT

--- extract_code(text, lang) -> string or nil.
M.extract_code = extract.code
--- extract_json(text) -> value or nil, "EPARSE: ...", "EPARSE".
M.extract_json = extract.json

return M
