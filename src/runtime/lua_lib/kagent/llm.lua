-- kagent.llm: chat calls to Anthropic, OpenAI and OpenAI-compatible servers, concurrent (one
-- task per call, a semaphore per provider), retried with backoff, accounted against budgets,
-- and recordable/replayable. Provider formats live in kagent/llm/<provider>.lua.
local http = require("kagent.http")
local json = require("kagent.json")
local task = require("kagent.task")
local log = require("kagent.log")
local secrets = require("kagent.secrets")
local clock = require("kagent.time")
local extract = require("kagent.llm.extract")
local record = require("kagent.llm.record")
local builtin_prices = require("kagent.llm.prices")

local M = {}

local PROVIDERS = { anthropic = require("kagent.llm.anthropic"), openai = require("kagent.llm.openai") }
local RETRY_STATUS = { [408] = true, [409] = true, [429] = true, [500] = true, [502] = true,
                       [503] = true, [504] = true, [529] = true }
local RETRY_CODE = { ETIMEDOUT = true, ECONNECT = true, EHTTP = true }
local CACHE_MODES = { off = true, record = true, replay = true, auto = true }
local NOT_CONFIGURED = "no LLM configured: set ANTHROPIC_API_KEY or OPENAI_API_KEY (or KAGENT_LLM_URL "
  .. "for an OpenAI-compatible server), optionally KAGENT_MODEL=provider:model, in the environment or .env"

local cfg, totals, semaphores, store, unpriced
local occurrences = {} -- request key -> times asked in this run

local function zero_usage()
  return { calls = 0, failures = 0, input_tokens = 0, output_tokens = 0, cache_read_tokens = 0,
           cache_write_tokens = 0, cost_usd = 0, http_requests = 0, retries = 0, replayed = 0 }
end

local function reset()
  cfg = { retries = 6, backoff = { base = 1.0, max = 60 }, timeout = 600, connect_timeout = 10,
          max_tokens = 8192, prices = {}, budget = {} }
  semaphores, store, unpriced = {}, nil, {}
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

--- configure{model, base_url, api_key_env, cache, db, concurrency, retries, backoff, timeout,
--- connect_timeout, max_tokens, prices, budget, reset} -> true.
function M.configure(opts)
  if type(opts) ~= "table" then error("llm.configure: expected a table", 2) end
  if opts.reset then reset() end
  if opts.cache ~= nil and not CACHE_MODES[opts.cache] then
    error("llm.configure: cache must be off|record|replay|auto", 2)
  end
  for _, k in ipairs({ "model", "base_url", "api_key_env", "cache", "concurrency", "retries",
                       "timeout", "connect_timeout", "max_tokens" }) do
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

-- "provider:model" -> provider, model. A prefix that is not a provider stays part of the name
-- (Ollama names such as "qwen2.5:7b").
local function split_model(spec)
  if not spec then return nil, nil end
  local p, m = spec:match("^(%w+):(.+)$")
  if p and PROVIDERS[p] then return p, m end
  return nil, spec
end

-- Resolves the provider for a call -> {provider, model, url, key, key_env} or nil, err, code.
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
  m = m or cm or prov.default_model
  local base
  if p == "openai" then base = base_compat or prov.default_base
  else base = cfg.base_url or env(prov.base_env) or prov.default_base end
  local key_env = cfg.api_key_env or prov.key_env
  local key = env(key_env)
  -- A self-hosted OpenAI-compatible server may need no key; the real services always do.
  local needs_key = p == "anthropic" or base == prov.default_base
  if needs_key and not key then
    return nil, "EAUTH: " .. key_env .. " is not set (needed for " .. p .. "; set it in the environment or .env)",
      "EAUTH"
  end
  return { provider = p, prov = prov, model = m, base = base, url = prov.url(base), key = key,
           key_env = key_env }
end

--- configured() -> true, "provider:model" | false, what to set.
function M.configured()
  local r, err = resolve(nil)
  if not r then return false, (err:gsub("^%u+: ", "")) end
  return true, r.provider .. ":" .. r.model
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

local function cost_of(model, u)
  local p = price_for(model)
  if not p then
    if not unpriced[model] then
      unpriced[model] = true
      log.warn("llm: no price for model %s; its cost counts as 0 (add it with llm.configure{prices=...})", model)
    end
    return 0
  end
  return ((u.input_tokens * (p.input or 0)) + (u.output_tokens * (p.output or 0))
    + (u.cache_read_tokens * (p.cache_read or 0)) + (u.cache_write_tokens * (p.cache_write or 0))) / 1e6
end

local TOKEN_FIELDS = { "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens" }

local function account(model, u, cost)
  local per = totals.by_model[model]
  if not per then
    per = zero_usage()
    totals.by_model[model] = per
  end
  for _, t in ipairs({ totals, per }) do
    t.calls = t.calls + 1
    for _, k in ipairs(TOKEN_FIELDS) do t[k] = t[k] + u[k] end
    t.cost_usd = t.cost_usd + cost
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

--- usage() -> run totals (a copy).
function M.usage()
  local out = {}
  for k, v in pairs(totals) do out[k] = v end
  out.by_model = {}
  for model, per in pairs(totals.by_model) do
    local c = {}
    for k, v in pairs(per) do c[k] = v end
    out.by_model[model] = c
  end
  return out
end

function M.reset_usage()
  totals = zero_usage()
  totals.by_model = {}
end

-- Transport with retries ---------------------------------------------------------------------------

local function semaphore_for(r)
  local k = r.provider .. " " .. r.base
  if not semaphores[k] then
    local n = cfg.concurrency or tonumber(env("KAGENT_LLM_CONCURRENCY") or "") or 256
    semaphores[k] = task.semaphore(n)
  end
  return semaphores[k]
end

-- Removes the key (and anything shaped like a secret key) from text that may reach a message.
local function scrub(text, key)
  text = tostring(text or "")
  if key and #key > 0 then
    local s = 1
    while true do
      local a, b = text:find(key, s, true)
      if not a then break end
      text = text:sub(1, a - 1) .. "***" .. text:sub(b + 1)
      s = a + 3
    end
  end
  return (text:gsub("sk%-[%w%-_%*]+", "sk-***"))
end

local function retry_after(headers)
  local ms = tonumber(headers["retry-after-ms"] or "")
  if ms then return ms / 1000 end
  return tonumber(headers["retry-after"] or "")
end

local function backoff(k)
  local d = math.min(cfg.backoff.max, cfg.backoff.base * 2 ^ (k - 1))
  return d / 2 + math.random() * d / 2
end

-- The failure for a final (not retried, or retries spent) HTTP status.
local function status_failure(r, res)
  local server = r.prov.error_message(res.body)
  local said = server and (": " .. scrub(server, r.key)) or ""
  local s = res.status
  if s == 401 or s == 403 then
    return "EAUTH: " .. r.provider .. " refused the API key in " .. r.key_env .. " (HTTP " .. s .. ")" .. said
      .. "; check the key and its permissions", "EAUTH"
  elseif s == 400 then
    return "EBADREQ: " .. r.provider .. " rejected the request (HTTP 400)" .. said, "EBADREQ"
  elseif s == 404 then
    return "ENOTFOUND: " .. r.provider .. " has no model '" .. r.model .. "' at " .. r.base .. " (HTTP 404)" .. said
      .. "; check KAGENT_MODEL or the base URL", "ENOTFOUND"
  elseif s == 429 or s == 529 then
    return "ERATELIMIT: " .. r.provider .. " still rate-limited or overloaded (HTTP " .. s .. ") after "
      .. "the retries" .. said, "ERATELIMIT"
  end
  return "EHTTP: " .. r.provider .. " answered HTTP " .. s .. said, "EHTTP"
end

-- One call with retries -> parsed, attempts or nil, err, code, attempts.
local function call(r, body_text, req)
  local retries = req.retries or cfg.retries
  local sem = semaphore_for(r)
  local k = 0
  while true do
    k = k + 1
    sem:acquire()
    -- A killed task never reaches the release below; its kill hook gives the slot back.
    local me = task.current()
    local prev_hook = me.on_kill
    me.on_kill = function()
      sem:release()
      if prev_hook then prev_hook() end
    end
    totals.http_requests = totals.http_requests + 1
    local ok, res, err, code = pcall(http.request, {
      method = "POST", url = r.url, headers = r.prov.headers(r.key), body = body_text,
      timeout = req.timeout or cfg.timeout, connect_timeout = cfg.connect_timeout,
    })
    me.on_kill = prev_hook
    sem:release()
    if not ok then error(res, 0) end -- misuse or kill: not ours to swallow
    local delay, final_err, final_code
    if res and res.status == 200 then
      local decoded = json.decode(res.body)
      local parsed, why
      if decoded == nil then
        why = "reply is not JSON (content-type " .. tostring(res.headers["content-type"]) .. ", "
          .. #res.body .. " bytes)"
      else
        parsed, why = r.prov.parse(decoded)
      end
      if parsed then return parsed, k end
      return nil, "EPARSE: " .. r.provider .. " " .. why, "EPARSE", k
    elseif res then
      final_err, final_code = status_failure(r, res)
      if RETRY_STATUS[res.status] then delay = retry_after(res.headers) or backoff(k) end
    else
      final_err, final_code = scrub(err, r.key), code
      if RETRY_CODE[code] then delay = backoff(k) end
    end
    if not delay or k > retries then return nil, final_err, final_code, k end
    totals.retries = totals.retries + 1
    log.warn("llm: %s %s (%s); retry %d/%d in %.2f s", r.provider, r.model,
      res and ("HTTP " .. res.status) or final_code, k, retries, delay)
    task.sleep(delay)
  end
end

-- Record/replay -------------------------------------------------------------------------------------

local function cache_mode()
  local m = cfg.cache or env("KAGENT_LLM_CACHE") or "off"
  if not CACHE_MODES[m] then return "off" end
  return m
end

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
end

local function result_of(r, parsed, t0, attempts, cached)
  local u = parsed.usage
  local cost = cost_of(r.model, u)
  account(r.model, u, cost)
  if parsed.truncated then
    log.warn("llm: %s %s reply stopped at max_tokens (%d output tokens)", r.provider, r.model, u.output_tokens)
  end
  return {
    text = parsed.text, usage = u, cost_usd = cost, model = r.model, provider = r.provider,
    latency = clock.now() - t0, cached = cached, attempts = attempts,
    stop_reason = parsed.stop_reason, truncated = parsed.truncated == true,
  }
end

local function fail(err, code)
  totals.failures = totals.failures + 1
  return nil, err, code
end

--- chat{messages, system, model, max_tokens, temperature, top_p, stop, reasoning_effort,
--- thinking_tokens, timeout, retries, extra, tag} ⏸ -> result | nil, "CODE: message", "CODE".
function M.chat(req)
  check_request(req)
  task._running_task("llm.chat")
  local t0 = clock.now()
  local r, err, code = resolve(req.model)
  if not r then return fail(err, code) end
  local berr = budget_error()
  if berr then return fail(berr, "EBUDGET") end
  local body = r.prov.body(req, r.model, req.max_tokens or cfg.max_tokens)
  if req.extra then
    for k, v in pairs(req.extra) do body[k] = v end
  end
  local body_text = json.encode(body)
  local mode = cache_mode()
  local key
  if mode ~= "off" then
    -- The key covers what decides the reply (provider and body, which names the model). Headers
    -- (and so the API key) and the base URL are left out, so a record replays behind any relay.
    key = http._sha256(r.provider .. "\n" .. body_text)
    -- The n-th identical request of a run has its own entry, so workers that send the same
    -- prompt (sampling differs) replay the replies they got, in the order they asked.
    local n = (occurrences[key] or 0) + 1
    occurrences[key] = n
    if n > 1 then key = key .. "#" .. n end
    local s, serr, scode = get_store()
    if not s then return fail(serr, scode) end
    if mode == "replay" or mode == "auto" then
      local stored = s.get(key)
      if stored then
        local parsed = json.decode(stored)
        if type(parsed) == "table" and type(parsed.text) == "string" then
          totals.replayed = totals.replayed + 1
          return result_of(r, parsed, t0, 0, true)
        end
      end
      if mode == "replay" then
        return fail("EREPLAY: no recorded reply for this request (key " .. key:sub(1, 16) .. ", "
          .. r.provider .. ":" .. r.model .. ")", "EREPLAY")
      end
    end
  end
  local parsed, attempts_or_err, fail_code = call(r, body_text, req)
  if not parsed then return fail(attempts_or_err, fail_code) end
  local attempts = attempts_or_err
  if key then
    local stored = json.encode({ text = parsed.text, usage = parsed.usage, stop_reason = parsed.stop_reason,
                                 truncated = parsed.truncated, model = parsed.model, tag = req.tag })
    local ok, perr = store.put(key, body_text, stored)
    if ok == nil then log.warn("llm: could not record a reply: %s", tostring(perr)) end
  end
  return result_of(r, parsed, t0, attempts, false)
end

--- extract_code(text, lang) -> string or nil.
M.extract_code = extract.code
--- extract_json(text) -> value or nil, "EPARSE: ...", "EPARSE".
M.extract_json = extract.json

return M
