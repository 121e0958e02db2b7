-- kagent.llm, the configuration: what llm.configure{} set (else the environment, else the
-- defaults), and which provider, model, server and key a call goes to. Read by the other parts of
-- kagent.llm at each call, so a change applies to the next call.
local secrets = require("kagent.secrets")
local clock = require("kagent.time")
local timeouts = require("kagent.llm.timeouts")

local M = {}

M.PROVIDERS = { anthropic = require("kagent.llm.anthropic"), openai = require("kagent.llm.openai") }
local PROVIDERS = M.PROVIDERS
-- Defaults that suit remote APIs and end a dead provider's run within about two minutes
-- (agents/run/llm_guard.lua adds them up; docs/lua-api.md, "Timeouts"). Replies stream by default:
-- a live server answers a stream request with its headers at once (start), and sends every few
-- tokens (Anthropic also pings), so silence there is a stall (stream_idle); a whole reply sends
-- nothing until it is complete, so its idle timeout bounds the generation and cannot tell a dead
-- server from a long reply. A reply over max_body (bytes on the wire), or whose text is over
-- max_reply (no default: configure{} sets it), is refused and not asked again.
M.DEFAULTS = { timeout = 600, idle = 300, stream_idle = 60, connect = 10, start = 15, stream = true,
  retries = 2, backoff = { base = 1.0, max = 60 }, max_body = 64 * 1048576 }
local D = M.DEFAULTS
local FLAGS = { ["1"] = true, ["true"] = true, yes = true, on = true,
                ["0"] = false, ["false"] = false, no = false, off = false }
local CACHE_MODES = { off = true, record = true, replay = true, auto = true }
--- What configured() answers when nothing at all is configured (no key, URL or model).
M.NOT_CONFIGURED = "no LLM is configured: set ANTHROPIC_API_KEY or OPENAI_API_KEY (or KAGENT_LLM_URL "
  .. "for an OpenAI-compatible server), optionally KAGENT_MODEL=provider:model, in the environment or .env"

--- The settings in force: one table for the run, emptied and refilled by reset() (so the other
--- parts may keep a reference to it).
M.cfg = {}
local cfg = M.cfg

function M.reset()
  for k in pairs(cfg) do cfg[k] = nil end
  cfg.retries, cfg.backoff, cfg.max_tokens = D.retries, { base = D.backoff.base, max = D.backoff.max }, 8192
  cfg.max_body, cfg.prices, cfg.budget = D.max_body, {}, {}
end
M.reset()

--- env(name) -> the variable's value, nil when unset or empty.
function M.env(name)
  local v = os.getenv(name)
  if v == nil or v == "" then return nil end
  return v
end
local env = M.env

function M.positive(v) return type(v) == "number" and v > 0 end
local positive = M.positive

--- configure(opts): checks and applies llm.configure's options (but `reset`, which llm.configure
--- handles); misuse raises at llm.configure's caller.
function M.configure(opts)
  if opts.cache ~= nil and not CACHE_MODES[opts.cache] then
    error("llm.configure: cache must be off|record|replay|auto", 3)
  end
  local limits = {}
  if type(opts.timeout) == "string" then
    local parsed, why = timeouts.parse(opts.timeout)
    if not parsed then error("llm.configure: timeout: " .. why, 3) end
    limits = parsed
  elseif opts.timeout ~= nil then
    limits.timeout = opts.timeout
  end
  for _, k in ipairs({ "idle_timeout", "connect_timeout", "start_timeout" }) do
    if opts[k] ~= nil then limits[k] = opts[k] end
  end
  for k, v in pairs(limits) do
    if not positive(v) then error("llm.configure: " .. k .. " must be a number of seconds > 0", 3) end
    cfg[k] = v
  end
  if opts.stream ~= nil and type(opts.stream) ~= "boolean" then error("llm.configure: stream must be a boolean", 3) end
  for _, k in ipairs({ "max_body", "max_reply" }) do
    if opts[k] ~= nil and not positive(opts[k]) then error("llm.configure: " .. k .. " must be a number of bytes > 0", 3) end
  end
  for _, k in ipairs({ "model", "base_url", "api_key_env", "cache", "concurrency", "retries", "stream",
                       "max_tokens", "max_body", "max_reply" }) do
    if opts[k] ~= nil then cfg[k] = opts[k] end
  end
  if opts.api_key_env ~= nil then secrets.add_name(opts.api_key_env) end
  if opts.db ~= nil then cfg.db = opts.db end
  if opts.backoff then
    for k, v in pairs(opts.backoff) do cfg.backoff[k] = v end
  end
  if opts.prices then
    for model, p in pairs(opts.prices) do cfg.prices[model] = p end
  end
  if opts.budget then
    for k, v in pairs(opts.budget) do cfg.budget[k] = v end
  end
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
function M.settings()
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
function M.resolve(model_arg)
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
  if not p then return nil, "ENOTSUP: " .. M.NOT_CONFIGURED, "ENOTSUP" end
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

-- A whole reply's JSON body for max_reply bytes of text: every byte escaped as \uXXXX at worst,
-- plus the envelope. Past it the HTTP layer stops reading (ETOOBIG): memory stays bounded.
local function whole_body_limit(max_reply)
  return 6 * max_reply + 65536
end

-- Limits of one call started at t0: its deadline and the timeouts of its attempts.
function M.call_limits(r, req, set, body, streaming, t0)
  local timeout = req.timeout or set.timeout
  local idle = req.idle_timeout or set.idle_timeout
  if not idle then
    idle = (streaming and not r.prov.silent_while_thinking(body or {})) and D.stream_idle or D.idle
  end
  -- the start timeout is a stream's only: a whole reply's headers come when it is complete
  local start = streaming and math.min(set.start_timeout, timeout) or nil
  local max_body = cfg.max_body
  if cfg.max_reply and not streaming then max_body = math.min(max_body, whole_body_limit(cfg.max_reply)) end
  return { timeout = timeout, deadline = (t0 or clock.now()) + timeout, idle = math.min(idle, timeout),
           connect = set.connect_timeout, start = start, retries = req.retries or cfg.retries,
           max_body = max_body, max_reply = cfg.max_reply }
end

return M
