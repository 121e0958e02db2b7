-- kagent.llm: chat calls to Anthropic, OpenAI and OpenAI-compatible servers, concurrent (one
-- task per call, a semaphore per provider), whole or streamed, retried with backoff within a
-- per-call deadline, accounted against budgets, and recordable/replayable. Provider formats live
-- in kagent/llm/<provider>.lua, the HTTP side and retries in kagent/llm/transport.lua.
local http = require("kagent.http")
local json = require("kagent.json")
local task = require("kagent.task")
local log = require("kagent.log")
local secrets = require("kagent.secrets")
local clock = require("kagent.time")
local extract = require("kagent.llm.extract")
local record = require("kagent.llm.record")
local builtin_prices = require("kagent.llm.prices")
local timeouts = require("kagent.llm.timeouts")
local transport = require("kagent.llm.transport")

local M = {}

local unpack = unpack  -- LuaJIT's (Lua 5.1)
local PROVIDERS = { anthropic = require("kagent.llm.anthropic"), openai = require("kagent.llm.openai") }
-- Defaults that suit remote APIs and end a dead provider's run within about two minutes
-- (agents/lib/llm_guard.lua adds them up; docs/lua-api.md, "Timeouts"). Replies stream by default:
-- a live server answers a stream request with its headers at once (start), and sends every few
-- tokens (Anthropic also pings), so silence there is a stall (stream_idle); a whole reply sends
-- nothing until it is complete, so its idle timeout bounds the generation and cannot tell a dead
-- server from a long reply. A reply over max_body is refused and not asked again.
M.DEFAULTS = { timeout = 600, idle = 300, stream_idle = 60, connect = 10, start = 15, stream = true,
  retries = 2, backoff = { base = 1.0, max = 60 }, max_body = 64 * 1048576 }
local D = M.DEFAULTS
local FLAGS = { ["1"] = true, ["true"] = true, yes = true, on = true,
                ["0"] = false, ["false"] = false, no = false, off = false }
local CACHE_MODES = { off = true, record = true, replay = true, auto = true }
local NOT_CONFIGURED = "no LLM is configured: set ANTHROPIC_API_KEY or OPENAI_API_KEY (or KAGENT_LLM_URL "
  .. "for an OpenAI-compatible server), optionally KAGENT_MODEL=provider:model, in the environment or .env"

local cfg, totals, semaphores, store, unpriced
local occurrences = {} -- request key -> times asked in this run

local served = {}      -- base URL -> model ids it lists (asked once per run)

local function zero_usage()
  return { calls = 0, failures = 0, input_tokens = 0, output_tokens = 0, cache_read_tokens = 0,
           cache_write_tokens = 0, cost_usd = 0, http_requests = 0, retries = 0, replayed = 0,
           replay_misses = 0, unpriced_calls = 0,
           gen_tokens = 0, gen_seconds = 0, tokens_per_s = 0, failures_by_code = {} }
end

local function reset()
  cfg = { retries = D.retries, backoff = { base = D.backoff.base, max = D.backoff.max }, max_tokens = 8192,
          max_body = D.max_body, prices = {}, budget = {} }
  semaphores, store, unpriced, served = {}, nil, {}, {}
end
reset()
totals = zero_usage()
totals.by_model = {}

local function env(name)
  local v = os.getenv(name)
  if v == nil or v == "" then return nil end
  return v
end

-- Configuration ----------------------------------------------------------------------------------

--- What configured() answers when nothing at all is configured (no key, URL or model).
M.NOT_CONFIGURED = NOT_CONFIGURED

local function positive(v) return type(v) == "number" and v > 0 end

--- configure{model, base_url, api_key_env, cache, db, concurrency, retries, backoff, timeout,
--- idle_timeout, connect_timeout, start_timeout, stream, max_tokens, max_body, prices, budget, reset} -> true.
--- `timeout` may also be a string in the KAGENT_LLM_TIMEOUT form (it then sets what it names).
function M.configure(opts)
  if type(opts) ~= "table" then error("llm.configure: expected a table", 2) end
  if opts.reset then reset() end
  if opts.cache ~= nil and not CACHE_MODES[opts.cache] then
    error("llm.configure: cache must be off|record|replay|auto", 2)
  end
  local limits = {}
  if type(opts.timeout) == "string" then
    local parsed, why = timeouts.parse(opts.timeout)
    if not parsed then error("llm.configure: timeout: " .. why, 2) end
    limits = parsed
  elseif opts.timeout ~= nil then
    limits.timeout = opts.timeout
  end
  for _, k in ipairs({ "idle_timeout", "connect_timeout", "start_timeout" }) do
    if opts[k] ~= nil then limits[k] = opts[k] end
  end
  for k, v in pairs(limits) do
    if not positive(v) then error("llm.configure: " .. k .. " must be a number of seconds > 0", 2) end
    cfg[k] = v
  end
  if opts.stream ~= nil and type(opts.stream) ~= "boolean" then error("llm.configure: stream must be a boolean", 2) end
  if opts.max_body ~= nil and not positive(opts.max_body) then
    error("llm.configure: max_body must be a number of bytes > 0", 2)
  end
  for _, k in ipairs({ "model", "base_url", "api_key_env", "cache", "concurrency", "retries", "stream",
                       "max_tokens", "max_body" }) do
    if opts[k] ~= nil then cfg[k] = opts[k] end
  end
  if opts.api_key_env ~= nil then secrets.add_name(opts.api_key_env) end
  if opts.db ~= nil then
    cfg.db = opts.db
    store = nil
  end
  if opts.backoff then
    for k, v in pairs(opts.backoff) do cfg.backoff[k] = v end
  end
  if opts.prices then
    for model, p in pairs(opts.prices) do cfg.prices[model] = p end
  end
  if opts.budget then
    for k, v in pairs(opts.budget) do cfg.budget[k] = v end
  end
  if opts.model or opts.base_url or opts.concurrency then semaphores = {} end
  return true
end

--- cache_mode() -> the record/replay mode in force: "off" | "record" | "replay" | "auto"
--- (configure{cache}, else KAGENT_LLM_CACHE, else "off").
local function cache_mode()
  local m = cfg.cache or env("KAGENT_LLM_CACHE") or "off"
  if not CACHE_MODES[m] then return "off" end
  return m
end
M.cache_mode = cache_mode

-- "provider:model" -> provider, model. A prefix that is not a provider stays part of the name
-- (Ollama names such as "qwen2.5:7b").
local function split_model(spec)
  if not spec then return nil, nil end
  local p, m = spec:match("^(%w+):(.+)$")
  if p and PROVIDERS[p] then return p, m end
  return nil, spec
end

-- The user's settings that are not the provider's: timeouts and streaming, from configure{},
-- else the environment. -> {timeout, idle_timeout (nil: by mode), connect_timeout, start_timeout, stream} or
-- nil, "ENOTSUP: ...", "ENOTSUP" when a variable cannot be read.
local function settings()
  local envt = {}
  local text = env("KAGENT_LLM_TIMEOUT")
  if text then
    local parsed, why = timeouts.parse(text)
    if not parsed then return nil, "ENOTSUP: KAGENT_LLM_TIMEOUT: " .. why, "ENOTSUP" end
    envt = parsed
  end
  local stream = cfg.stream
  if stream == nil then
    local flag = env("KAGENT_LLM_STREAM")
    if flag then
      stream = FLAGS[flag:lower()]
      if stream == nil then
        return nil, "ENOTSUP: KAGENT_LLM_STREAM='" .. flag .. "' (expected 1 or 0)", "ENOTSUP"
      end
    end
  end
  if stream == nil then stream = D.stream end
  return { timeout = cfg.timeout or envt.timeout or D.timeout,
           idle_timeout = cfg.idle_timeout or envt.idle_timeout,
           connect_timeout = cfg.connect_timeout or envt.connect_timeout or D.connect,
           start_timeout = cfg.start_timeout or envt.start_timeout or D.start,
           stream = stream == true }
end

-- Resolves the provider for a call -> {provider, model, url, key, key_env, base, compat} or nil,
-- err, code. model is nil when an OpenAI-compatible server is to be asked which it serves.
local function resolve(model_arg)
  local base_compat = cfg.base_url or env("KAGENT_LLM_URL") or env("OPENAI_BASE_URL")
  local cp, cm = split_model(cfg.model or env("KAGENT_MODEL"))
  local p, m = split_model(model_arg)
  if not p then
    p = cp
    if not p then
      if cfg.base_url or env("KAGENT_LLM_URL") then p = "openai"
      elseif env("ANTHROPIC_API_KEY") then p = "anthropic"
      elseif env("OPENAI_API_KEY") or base_compat then p = "openai"
      end
    end
  end
  if not p then return nil, "ENOTSUP: " .. NOT_CONFIGURED, "ENOTSUP" end
  local prov = PROVIDERS[p]
  local base
  if p == "openai" then base = base_compat or prov.default_base
  else base = cfg.base_url or env(prov.base_env) or prov.default_base end
  -- A self-hosted server names its own models; the real services have a default.
  local compat = p == "openai" and base ~= prov.default_base
  m = m or cm or (not compat and prov.default_model or nil)
  local key_env = cfg.api_key_env or prov.key_env
  local key = env(key_env)
  -- A self-hosted OpenAI-compatible server may need no key; the real services always do, except
  -- in replay, which sends nothing.
  local needs_key = (p == "anthropic" or base == prov.default_base) and cache_mode() ~= "replay"
  if needs_key and not key then
    return nil, "EAUTH: " .. key_env .. " is not set (needed for " .. p .. "; set it in the environment or .env)",
      "EAUTH"
  end
  return { provider = p, prov = prov, model = m, base = base, url = prov.url(base), key = key,
           key_env = key_env, compat = compat }
end

-- Asks an OpenAI-compatible server which models it serves (once per run and base URL), with the
-- call's retries and deadline -> ids | nil, failure.
local function served_models(r, limits)
  if served[r.base] then return served[r.base] end
  local url = r.prov.models_url(r.base)
  local ctx = { what = "GET " .. url, retries = limits.retries, backoff = cfg.backoff, deadline = limits.deadline,
                timeout = limits.timeout, on_retry = function() totals.retries = totals.retries + 1 end }
  local ids, f = transport.run(ctx, function(_, remaining)
    totals.http_requests = totals.http_requests + 1
    local d, gf = transport.get(r, { remaining = remaining, connect = limits.connect, idle = limits.idle }, url)
    if not d then return nil, gf end
    local list = r.prov.list_models(d)
    if not list then return nil, transport.failure("EPARSE", url .. " did not answer a model list", { status = 200 }) end
    return list
  end)
  if not ids then
    f.message = f.message .. " (listing the models at " .. url .. "; set KAGENT_MODEL to skip this)"
    return nil, f
  end
  served[r.base] = ids
  return ids
end

-- Fills r.model from the server's list when none is named -> true | nil, failure.
local function pick_served_model(r, limits)
  local ids, f = served_models(r, limits)
  if not ids then return nil, f end
  if #ids == 1 then
    r.model = ids[1]
    return true
  end
  local shown = { unpack(ids, 1, math.min(#ids, 20)) }
  if #ids > 20 then shown[#shown + 1] = "and " .. (#ids - 20) .. " more" end
  local which = #ids == 0 and "serves no model" or ("serves " .. #ids .. " models: " .. table.concat(shown, ", "))
  return nil, transport.failure("ENOTSUP", "KAGENT_MODEL is not set and the server at " .. r.base .. " " .. which
    .. "; set KAGENT_MODEL=openai:<one of them> (or llm.configure{model = ...})", {})
end

-- Limits of one call started at t0: its deadline and the timeouts of its attempts.
local function call_limits(r, req, set, body, streaming, t0)
  local timeout = req.timeout or set.timeout
  local idle = req.idle_timeout or set.idle_timeout
  if not idle then
    idle = (streaming and not r.prov.silent_while_thinking(body or {})) and D.stream_idle or D.idle
  end
  -- the start timeout is a stream's only: a whole reply's headers come when it is complete
  local start = streaming and math.min(set.start_timeout, timeout) or nil
  return { timeout = timeout, deadline = (t0 or clock.now()) + timeout, idle = math.min(idle, timeout),
           connect = set.connect_timeout, start = start, retries = req.retries or cfg.retries,
           max_body = cfg.max_body }
end

--- configured() ⏸ (only to ask a local server its model) -> true, "provider:model" | false, why,
--- code (ENOTSUP, EAUTH, or the failure of asking the server).
function M.configured()
  local set, serr, scode = settings()
  if not set then return false, (serr:gsub("^%u+: ", "")), scode end
  local r, err, code = resolve(nil)
  if not r then return false, (err:gsub("^%u+: ", "")), code end
  if not r.model then
    task._running_task("llm.configured")
    local ok, f = pick_served_model(r, call_limits(r, {}, set, nil, false))
    if not ok then return false, f.message, f.code end
  elseif r.compat and transport.loopback(r.base) and cache_mode() ~= "replay" then
    -- a server on this machine is asked whether it listens (its model list, once per run): one
    -- that is not running is found now, in milliseconds, not after a run's worth of retries
    -- (a strict replay sends nothing, so asks nothing)
    task._running_task("llm.configured")
    local _, f = served_models(r, call_limits(r, {}, set, nil, false))
    if f and f.refused then return false, f.message, f.code end
  end
  return true, r.provider .. ":" .. r.model
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
  local ids, f = served_models(r, call_limits(r, {}, set, nil, false))
  if not ids then return nil, f.code .. ": " .. f.message, f.code end
  local out = {}
  for i, id in ipairs(ids) do out[i] = id end
  return out
end

-- Accounting --------------------------------------------------------------------------------------

local function price_for(model)
  local function find(tbl)
    if tbl[model] then return tbl[model] end
    local best, best_len = nil, 0
    for name, p in pairs(tbl) do
      if #name > best_len and model:sub(1, #name) == name then best, best_len = p, #name end
    end
    return best
  end
  return find(cfg.prices) or find(builtin_prices)
end

-- USD of a call, and whether the model has a price. A model without one adds 0 to the totals
-- and its call is counted in `unpriced_calls`, so a report can say its cost is unknown rather
-- than guess it (a model on a self-hosted server is not warned about).
local function cost_of(r, u)
  local model = r.model
  local p = price_for(model)
  if not p then
    if not unpriced[model] and not r.compat then
      unpriced[model] = true
      log.warn("llm: no price for model %s; its cost is unknown (add it with llm.configure{prices=...})", model)
    end
    return 0, false
  end
  return ((u.input_tokens * (p.input or 0)) + (u.output_tokens * (p.output or 0))
    + (u.cache_read_tokens * (p.cache_read or 0)) + (u.cache_write_tokens * (p.cache_write or 0))) / 1e6, true
end

local TOKEN_FIELDS = { "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens" }

-- Adds a call to the run's and its model's totals. gen_tokens over gen_seconds is the decoding
-- rate of the calls that were timed (replayed calls are not).
local function account(model, u, cost, gen_tokens, gen_seconds, priced)
  local per = totals.by_model[model]
  if not per then
    per = zero_usage()
    totals.by_model[model] = per
  end
  for _, t in ipairs({ totals, per }) do
    t.calls = t.calls + 1
    if not priced then t.unpriced_calls = t.unpriced_calls + 1 end
    for _, k in ipairs(TOKEN_FIELDS) do t[k] = t[k] + u[k] end
    t.cost_usd = t.cost_usd + cost
    if gen_seconds then
      t.gen_tokens = t.gen_tokens + gen_tokens
      t.gen_seconds = t.gen_seconds + gen_seconds
      t.tokens_per_s = t.gen_seconds > 0 and t.gen_tokens / t.gen_seconds or 0
    end
  end
end

local function budget_error()
  local b = cfg.budget
  local max_usd = b.max_usd or tonumber(env("KAGENT_LLM_MAX_USD") or "")
  local max_tokens = b.max_tokens or tonumber(env("KAGENT_LLM_MAX_TOKENS") or "")
  if max_usd and totals.cost_usd >= max_usd then
    return string.format("EBUDGET: cost budget spent (%.4f of %.4f USD)", totals.cost_usd, max_usd)
  end
  local used = totals.input_tokens + totals.output_tokens + totals.cache_read_tokens + totals.cache_write_tokens
  if max_tokens and used >= max_tokens then
    return string.format("EBUDGET: token budget spent (%d of %d tokens)", used, max_tokens)
  end
end

-- A copy, one level of nested tables deep (by_model entries copied by the caller).
local function copy(t)
  local out = {}
  for k, v in pairs(t) do
    if type(v) == "table" then
      local c = {}
      for k2, v2 in pairs(v) do c[k2] = v2 end
      v = c
    end
    out[k] = v
  end
  return out
end

--- usage() -> run totals (a copy).
function M.usage()
  local out = copy(totals)
  out.by_model = {}
  for model, per in pairs(totals.by_model) do out.by_model[model] = copy(per) end
  return out
end

function M.reset_usage()
  totals = zero_usage()
  totals.by_model = {}
end

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
                start = limits.start, max_body = limits.max_body }
  -- A killed task never reaches the release below; its kill hook gives the slot back and
  -- aborts a stream that was not parked on its transfer (e.g. killed inside on_token).
  local me = task.current()
  local prev_hook = me.on_kill
  me.on_kill = function()
    sem:release()
    if lim.stream then lim.stream:close() end
    if prev_hook then prev_hook() end
  end
  totals.http_requests = totals.http_requests + 1
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

-- Record/replay -------------------------------------------------------------------------------------

local function get_store()
  if store then return store end
  local s, err, code = record.open(cfg.db)
  if not s then return nil, err, code end
  store = s
  return store
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
  local cost, priced = cost_of(r, u)
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
  account(r.model, u, cost, gen_tokens, gen_seconds, priced)
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
  totals.failures = totals.failures + 1
  totals.failures_by_code[code] = (totals.failures_by_code[code] or 0) + 1
  f = f or {}
  local info = { code = code, message = message, status = f.status, server_error = f.server_error,
                 attempts = f.attempts or 0, elapsed = f.elapsed or 0, retryable = f.retryable == true,
                 provider = r and r.provider, model = r and r.model }
  return nil, code .. ": " .. message, code, info
end

local function fail_text(err, code, r)
  return fail(code, (err:gsub("^%u+: ", "")), nil, r)
end

-- On a 404 from a self-hosted server, the models it does serve (if it says so quickly).
local function name_served(r, f)
  local ids = served_models(r, { retries = 0, deadline = clock.now() + 5, timeout = 5, connect = 5, idle = 5 })
  if ids then f.message = f.message .. "; the server lists: " .. table.concat(ids, ", ") end
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
  local berr = budget_error()
  if berr then return fail_text(berr, "EBUDGET", r) end
  local streaming = req.stream
  if streaming == nil then streaming = set.stream end
  if not r.model then
    local ok, f = pick_served_model(r, call_limits(r, req, set, nil, false, t0))
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
  local key
  if mode ~= "off" then
    -- The key covers what decides the reply (provider and body, which names the model). Headers
    -- (and so the API key) and the base URL are left out, so a record replays behind any relay.
    -- A caller's replay_key (its place in a run and the parts of the request that do not change
    -- from run to run) replaces the body, so a run whose prompts carry fresh measurements replays.
    if req.replay_key then
      key = "k:" .. http._sha256(r.provider .. "\n" .. r.model .. "\n" .. req.replay_key)
    else
      key = http._sha256(r.provider .. "\n" .. body_text)
    end
    -- The n-th identical request of a run has its own entry, so workers that send the same
    -- prompt (sampling differs) replay the replies they got, in the order they asked.
    local n = (occurrences[key] or 0) + 1
    occurrences[key] = n
    if n > 1 then key = key .. "#" .. n end
    local s, serr2, scode2 = get_store()
    if not s then return fail_text(serr2, scode2, r) end
    if mode == "replay" or mode == "auto" then
      local stored = s.get(key)
      if stored then
        local parsed = json.decode(stored)
        if type(parsed) == "table" and type(parsed.text) == "string" then
          totals.replayed = totals.replayed + 1
          local res = result_of(r, parsed, t0, 0, true)
          if req.on_token then
            req.on_token(res.text, { attempt = 0, chars = #res.text, tokens = res.usage.output_tokens, elapsed = 0 })
          end
          return res
        end
      end
      if mode == "replay" then
        totals.replay_misses = totals.replay_misses + 1
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
                on_retry = function() totals.retries = totals.retries + 1 end }
  local parsed, f = transport.run(ctx, function(k, remaining)
    return attempt(r, wire, limits, remaining, streaming, function(text, p, ta) track.delta(k, text, p, ta) end)
  end)
  if not parsed then
    if f.code == "ENOTFOUND" and r.compat then name_served(r, f) end
    return fail(f.code, f.message, f, r)
  end
  local attempts = f
  local first = streaming and track.prog.attempt == attempts and track.t_first or nil
  -- A stream whose server reported no usage: count the output tokens it streamed.
  if streaming and not parsed.usage_reported and parsed.usage.output_tokens == 0 and track.prog.tokens > 0 then
    parsed.usage.output_tokens = track.prog.tokens
    parsed.usage_estimated = true
  end
  if key then
    local stored = json.encode({ text = parsed.text, usage = parsed.usage, stop_reason = parsed.stop_reason,
                                 truncated = parsed.truncated, model = parsed.model, tag = req.tag })
    local ok, perr = store.put(key, body_text, stored)
    if ok == nil then log.warn("llm: could not record a reply: %s", tostring(perr)) end
  end
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
