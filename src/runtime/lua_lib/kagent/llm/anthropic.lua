-- Anthropic Messages API: request body, reply parsing, and the streamed form (server-sent
-- events). No transport here.
local json = require("kagent.json")
local errors = require("kagent.llm.errors")

local M = { name = "anthropic", key_env = "ANTHROPIC_API_KEY", default_model = "claude-sonnet-4-5",
            default_base = "https://api.anthropic.com", base_env = "ANTHROPIC_BASE_URL" }

-- Anthropic allows 4 cache breakpoints per request; the system prompt takes one.
local MAX_BREAKPOINTS = 4

local function blocks(content)
  if type(content) == "string" then return { { type = "text", text = content } } end
  return content -- already an array of content blocks
end

function M.url(base) return base:gsub("/+$", "") .. "/v1/messages" end

--- GET {base}/v1/models (up to 1000 ids) and GET {base}/v1/models/{id} (resolves an alias) ->
--- their URLs; list_models(decoded) -> the listed model ids, or nil: the list has OpenAI's shape
--- ({data = [{id = ...}]}).
function M.models_url(base) return base:gsub("/+$", "") .. "/v1/models?limit=1000" end
function M.model_url(base, id) return base:gsub("/+$", "") .. "/v1/models/" .. id end
M.list_models = require("kagent.llm.openai").list_models

function M.headers(key)
  return { ["x-api-key"] = key, ["anthropic-version"] = "2023-06-01",
           ["content-type"] = "application/json" }
end

--- Builds the request body. `req` is the chat{} table; `max_tokens` already defaulted.
function M.body(req, model, max_tokens)
  local body = { model = model, max_tokens = max_tokens }
  local used = 0
  if req.system then
    body.system = blocks(req.system)
    if req.cache_system ~= false and req.prompt_cache ~= false then
      body.system[#body.system].cache_control = { type = "ephemeral" }
      used = 1
    end
  end
  -- Only the last marked messages get a breakpoint: a breakpoint caches everything before it.
  local marked = {}
  for i, m in ipairs(req.messages) do
    if m.cache and req.prompt_cache ~= false then marked[#marked + 1] = i end
  end
  local first_marked = math.max(1, #marked - (MAX_BREAKPOINTS - used) + 1)
  local mark = {}
  for k = first_marked, #marked do mark[marked[k]] = true end
  body.messages = {}
  for i, m in ipairs(req.messages) do
    local content = blocks(m.content)
    if mark[i] then
      -- Copy so the caller's table is not changed.
      local copy = {}
      for j, b in ipairs(content) do copy[j] = b end
      local last = {}
      for k, v in pairs(copy[#copy]) do last[k] = v end
      last.cache_control = { type = "ephemeral" }
      copy[#copy] = last
      content = copy
    end
    body.messages[i] = { role = m.role, content = content }
  end
  body.temperature = req.temperature
  body.top_p = req.top_p
  if req.stop then body.stop_sequences = req.stop end
  if req.reasoning_effort or req.thinking_tokens then
    body.thinking = { type = "enabled", budget_tokens = req.thinking_tokens or 4096 }
    body.temperature = nil -- extended thinking refuses a temperature
  end
  return body
end

--- Parses a 200 reply body -> {text, usage, stop_reason, model} or nil, message.
function M.parse(decoded)
  if type(decoded) ~= "table" or type(decoded.content) ~= "table" then
    return nil, "reply has no content array"
  end
  local parts = {}
  for _, b in ipairs(decoded.content) do
    if type(b) == "table" and b.type == "text" and type(b.text) == "string" then parts[#parts + 1] = b.text end
  end
  local u = type(decoded.usage) == "table" and decoded.usage or {}
  local function n(v) return type(v) == "number" and v or 0 end
  return {
    text = table.concat(parts),
    usage = { input_tokens = n(u.input_tokens), output_tokens = n(u.output_tokens),
              cache_read_tokens = n(u.cache_read_input_tokens),
              cache_write_tokens = n(u.cache_creation_input_tokens) },
    stop_reason = type(decoded.stop_reason) == "string" and decoded.stop_reason or nil,
    truncated = decoded.stop_reason == "max_tokens",
    model = type(decoded.model) == "string" and decoded.model or nil,
  }
end

-- Streaming -----------------------------------------------------------------------------------

function M.stream_body(body) body.stream = true end

-- Thinking arrives as thinking deltas, so a streamed call is never silent for long.
function M.silent_while_thinking() return false end

-- The HTTP status an error event stands for, so it is retried (or not) like that status.
local ERROR_STATUS = { overloaded_error = 529, rate_limit_error = 429, invalid_request_error = 400,
                       authentication_error = 401, permission_error = 403, not_found_error = 404,
                       api_error = 500 }

--- stream_parser(): as in openai.lua. Deltas carry several tokens each, so p.tokens() estimates
--- them from the characters (about 4 a token) until message_delta gives the count.
function M.stream_parser()
  local parts, usage, chars = {}, {}, 0
  local stop, model
  local p = { deltas = 0, done = false }
  function p.event(name, data)
    local d = json.decode(data)
    if type(d) ~= "table" then
      p.bad = "stream event is not JSON: " .. data:sub(1, 80)
      return nil
    end
    local kind = d.type or name
    if kind == "content_block_delta" and type(d.delta) == "table" then
      local text = d.delta.text
      local thought = d.delta.thinking
      if type(thought) == "string" and thought ~= "" then
        p.deltas = p.deltas + 1
        chars = chars + #thought
        return ""
      end
      if type(text) == "string" and text ~= "" then
        p.deltas = p.deltas + 1
        chars = chars + #text
        parts[#parts + 1] = text
        return text
      end
    elseif kind == "message_start" and type(d.message) == "table" then
      if type(d.message.usage) == "table" then
        for k, v in pairs(d.message.usage) do usage[k] = v end
      end
      model = d.message.model
    elseif kind == "message_delta" then
      if type(d.delta) == "table" and type(d.delta.stop_reason) == "string" then stop = d.delta.stop_reason end
      if type(d.usage) == "table" then
        for k, v in pairs(d.usage) do usage[k] = v end
      end
    elseif kind == "message_stop" then
      p.done = true
    elseif kind == "error" then
      p.error = errors.message_of(d) or "the server reported an error mid-stream"
      p.error_status = type(d.error) == "table" and ERROR_STATUS[d.error.type] or 500
    end
    return nil
  end
  function p.tokens() return math.ceil(chars / 4) end
  function p.result()
    if not p.done then
      return nil, "stream ended before the reply did (no message_stop; " .. #table.concat(parts)
        .. " characters received)"
    end
    local parsed = M.parse({ content = { { type = "text", text = table.concat(parts) } }, usage = usage,
                             stop_reason = stop, model = model })
    parsed.usage_reported = usage.output_tokens ~= nil
    return parsed
  end
  return p
end

return M
