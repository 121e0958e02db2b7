-- kagent.llm, the models a server serves: an OpenAI-compatible server is asked its list
-- (GET /models, once per run and base URL) when no model is named, to tell whether a server on
-- this machine listens, and to name the models it has when it does not know the one asked for.
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

-- Asks an OpenAI-compatible server which models it serves (once per run and base URL), with the
-- call's retries and deadline -> ids | nil, failure.
function M.models(r, limits)
  if served[r.base] then return served[r.base] end
  local url = r.prov.models_url(r.base)
  local ctx = { what = "GET " .. url, retries = limits.retries, backoff = cfg.backoff, deadline = limits.deadline,
                timeout = limits.timeout, on_retry = function() accounting.add("retries") end }
  local ids, f = transport.run(ctx, function(_, remaining)
    accounting.add("http_requests")
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
function M.pick(r, limits)
  local ids, f = M.models(r, limits)
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

-- On a 404 from a self-hosted server, the models it does serve (if it says so quickly).
function M.add_to_failure(r, f)
  local ids = M.models(r, { retries = 0, deadline = clock.now() + 5, timeout = 5, connect = 5, idle = 5 })
  if ids then f.message = f.message .. "; the server lists: " .. table.concat(ids, ", ") end
end

return M
