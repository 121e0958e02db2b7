-- kagent.llm, the models a server serves: an OpenAI-compatible server is asked its list
-- (GET /models, once per run and base URL) when no model is named, to check before any work that
-- it takes the key and serves the model (llm.check), and to name the models it has when it does
-- not know the one asked for. Anthropic's API is asked for the model itself (GET /v1/models/{id},
-- which resolves an alias such as claude-sonnet-4-5 to its dated id).
local clock = require("kagent.time")
local config = require("kagent.llm.config")
local accounting = require("kagent.llm.accounting")
local transport = require("kagent.llm.transport")

local M = {}

local unpack = unpack  -- LuaJIT's (Lua 5.1)
local cfg = config.cfg
local served = {}      -- base URL -> model ids it lists (asked once per run)

--- forget(): servers are asked again (llm.configure{reset}).
function M.forget() served = {} end

--- SKIP_CHECK: how a user skips llm.check's request where a server has no model list.
M.SKIP_CHECK = "KAGENT_LLM_CHECK=0"

-- The URL's form where /models is missing: an OpenAI-compatible base without its /v1, or an
-- Anthropic base with one (the /v1 is added to it) -> a hint, or "".
local function url_hint(r)
  local base = transport.shown(r.base):gsub("/+$", "")
  if r.provider == "anthropic" then
    if base:match("/v1$") then return "; ANTHROPIC_BASE_URL ends in /v1, which kagent adds itself: try " .. base:gsub("/v1$", "") end
    return ""
  end
  if base:match("/v%d+$") then return "" end
  return "; the URL has no /v1: try KAGENT_LLM_URL=" .. base .. "/v1"
end

-- One GET with the limits' retries and deadline -> decoded JSON | nil, failure. A 404 says that
-- the URL has no such resource (not that a model is missing: none was asked for).
local function get(r, limits, url)
  local ctx = { what = "GET " .. transport.shown(url), retries = limits.retries, backoff = cfg.backoff, deadline = limits.deadline,
                timeout = limits.timeout, on_retry = function() accounting.add("retries") end }
  local d, f = transport.run(ctx, function(_, remaining)
    accounting.add("http_requests")
    return transport.get(r, { remaining = remaining, connect = limits.connect, idle = limits.idle }, url)
  end)
  if not d and f.status == 404 then
    f.code = "ENOTFOUND"
    f.message = "GET " .. transport.shown(url) .. " answered HTTP 404: the server at " .. transport.shown(r.base) .. " has no model list there"
      .. url_hint(r)
  end
  return d, f
end

-- The server's model ids (asked once per run and base URL) -> ids | nil, failure
local function list(r, limits)
  if served[r.base] then return served[r.base] end
  local url = r.prov.models_url(r.base)
  local d, f = get(r, limits, url)
  if not d then return nil, f end
  local ids = r.prov.list_models(d)
  if not ids then return nil, transport.failure("EPARSE", transport.shown(url) .. " did not answer a model list", { status = 200 }) end
  served[r.base] = ids
  return ids
end

-- "a, b, c" of at most 20 ids, then "and N more"
local function shown(ids)
  local s = { unpack(ids, 1, math.min(#ids, 20)) }
  if #ids > 20 then s[#s + 1] = "and " .. (#ids - 20) .. " more" end
  return table.concat(s, ", ")
end

-- Asks an OpenAI-compatible server which models it serves (once per run and base URL), with the
-- call's retries and deadline -> ids | nil, failure.
function M.models(r, limits)
  local ids, f = list(r, limits)
  if not ids then
    -- (a 404 says which URL to try instead: naming a model would not help)
    if f.code ~= "ENOTFOUND" then
      f.message = f.message .. " (listing the models at " .. transport.shown(r.prov.models_url(r.base)) .. "; set KAGENT_MODEL to skip this)"
    end
    return nil, f
  end
  return ids
end

-- Fills r.model from the server's list when none is named -> true | nil, failure.
function M.pick(r, limits)
  local ids, f = M.models(r, limits)
  if not ids then return nil, f end
  if #ids == 1 then
    r.model = ids[1]
    return true
  end
  local which = #ids == 0 and "serves no model" or ("serves " .. #ids .. " models: " .. shown(ids))
  return nil, transport.failure("ENOTSUP", "KAGENT_MODEL is not set and the server at " .. transport.shown(r.base) .. " " .. which
    .. "; set KAGENT_MODEL=openai:<one of them> (or llm.configure{model = ...})", {})
end

-- nil, f with the way out where the check itself may be what fails: a server with no model list,
-- a key allowed to chat but not to list models
local function with_way_out(f)
  if f.code == "ENOTFOUND" then
    f.message = f.message .. "; where the server serves no model list, " .. M.SKIP_CHECK .. " skips this check"
  elseif f.code == "EAUTH" and f.status == 403 then
    f.message = f.message .. " (a key that may chat but not list models: " .. M.SKIP_CHECK .. " skips this check)"
  end
  return nil, f
end

-- check(r, limits) -> true | nil, failure: the server takes the key (EAUTH where it refuses it)
-- and serves r.model (ENOTFOUND where it does not, naming the models it lists, or where the URL
-- has no model list, with a hint at /v1). Other failures are the transport's (ECONNECT,
-- ETIMEDOUT, EHTTP: the server does not answer).
function M.check(r, limits)
  if r.provider == "anthropic" then
    local d, f = get(r, limits, r.prov.model_url(r.base, r.model))
    if d then return true end
    if f.code ~= "ENOTFOUND" then return with_way_out(f) end
    -- the models it has, if it says so at once (the 404 may be the URL's, not the model's)
    local ids = list(r, { retries = 0, deadline = clock.now() + 5, timeout = 5, connect = 5, idle = 5 })
    if not ids then return with_way_out(f) end
    f.message = "anthropic has no model '" .. r.model .. "' at " .. transport.shown(r.base) .. "; it lists: " .. shown(ids)
    return nil, f
  end
  local ids, f = list(r, limits)
  if not ids then return with_way_out(f) end
  for _, id in ipairs(ids) do
    -- (Ollama lists "name:latest" and serves it as "name" too)
    if id == r.model or id == r.model .. ":latest" then return true end
  end
  return nil, transport.failure("ENOTFOUND", "the server at " .. transport.shown(r.base) .. " does not serve the model '" .. r.model
    .. "': it lists " .. (#ids == 0 and "no model" or shown(ids)) .. url_hint(r), { status = 200 })
end

-- On a 404 from a self-hosted server, the models it does serve (if it says so quickly).
function M.add_to_failure(r, f)
  local ids = M.models(r, { retries = 0, deadline = clock.now() + 5, timeout = 5, connect = 5, idle = 5 })
  if ids then f.message = f.message .. "; the server lists: " .. table.concat(ids, ", ") end
end

return M
