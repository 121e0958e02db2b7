-- OpenAI Chat Completions (and compatible servers): request body and reply parsing.
local json = require("kagent.json")

local M = { name = "openai", key_env = "OPENAI_API_KEY", default_model = "gpt-4.1",
            default_base = "https://api.openai.com/v1" }

-- Reasoning models refuse `max_tokens` and `temperature`; they take max_completion_tokens.
local function is_reasoning(model)
  return model:match("^o%d") ~= nil or model:match("^gpt%-5") ~= nil
end

function M.url(base) return base:gsub("/+$", "") .. "/chat/completions" end

function M.headers(key)
  local h = { ["content-type"] = "application/json" }
  if key then h["authorization"] = "Bearer " .. key end
  return h
end

local function text_of(content)
  if type(content) == "string" then return content end
  return content -- array of parts, passed as is
end

function M.body(req, model, max_tokens)
  local body = { model = model, messages = {} }
  if req.system then body.messages[1] = { role = "system", content = text_of(req.system) } end
  for _, m in ipairs(req.messages) do
    body.messages[#body.messages + 1] = { role = m.role, content = text_of(m.content) }
  end
  local reasoning = req.reasoning_effort ~= nil or is_reasoning(model)
  if reasoning then
    body.max_completion_tokens = max_tokens
    body.reasoning_effort = req.reasoning_effort
  else
    body.max_tokens = max_tokens
    body.temperature = req.temperature
    body.top_p = req.top_p
  end
  body.stop = req.stop
  return body
end

function M.parse(decoded)
  if type(decoded) ~= "table" or type(decoded.choices) ~= "table" or type(decoded.choices[1]) ~= "table" then
    return nil, "reply has no choices"
  end
  local choice = decoded.choices[1]
  local msg = type(choice.message) == "table" and choice.message or {}
  local text = type(msg.content) == "string" and msg.content or ""
  local u = type(decoded.usage) == "table" and decoded.usage or {}
  local function n(v) return type(v) == "number" and v or 0 end
  local details = type(u.prompt_tokens_details) == "table" and u.prompt_tokens_details or {}
  local cached = n(details.cached_tokens)
  return {
    text = text,
    usage = { input_tokens = math.max(0, n(u.prompt_tokens) - cached), output_tokens = n(u.completion_tokens),
              cache_read_tokens = cached, cache_write_tokens = 0 },
    stop_reason = type(choice.finish_reason) == "string" and choice.finish_reason or nil,
    truncated = choice.finish_reason == "length",
    model = type(decoded.model) == "string" and decoded.model or nil,
  }
end

function M.error_message(body)
  local d = json.decode(body or "")
  if type(d) == "table" and type(d.error) == "table" and type(d.error.message) == "string" then
    return d.error.message
  end
  if type(d) == "table" and type(d.error) == "string" then return d.error end -- some compatible servers
end

return M
