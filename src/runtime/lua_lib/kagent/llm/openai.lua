-- OpenAI Chat Completions (and compatible servers: vLLM, llama.cpp, Ollama): request body,
-- reply parsing, and the streamed form (server-sent chunks). No transport here.
local json = require("kagent.json")
local errors = require("kagent.llm.errors")

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

--- GET {base}/models -> its URL; list_models(decoded) -> the served model ids, or nil.
function M.models_url(base) return base:gsub("/+$", "") .. "/models" end
function M.list_models(d)
  if type(d) ~= "table" or type(d.data) ~= "table" then return nil end
  local ids = {}
  for _, m in ipairs(d.data) do
    if type(m) == "table" and type(m.id) == "string" then ids[#ids + 1] = m.id end
  end
  return ids
end

-- Streaming -----------------------------------------------------------------------------------

--- Makes a request body stream, with the usage in a last chunk (unless the caller's `extra`
--- already chose stream_options).
function M.stream_body(body)
  body.stream = true
  body.stream_options = body.stream_options or { include_usage = true }
end

--- Reasoning models send nothing while they reason, even when streaming: the caller gives such
--- calls the longer idle timeout of whole replies.
function M.silent_while_thinking(body) return body.max_completion_tokens ~= nil end

--- stream_parser() -> p: p.event(name, data) takes one server-sent event and returns the text it
--- adds (nil if none); p.deltas counts chunks with text or reasoning (these servers send one token
--- per chunk); p.done, p.error (the server's message) and p.error_status (its status, when it
--- gave one) say how the stream ended; p.result() -> parsed reply (as parse) or nil, why.
function M.stream_parser()
  local parts, usage, finish, model = {}, nil, nil, nil
  local p = { deltas = 0, done = false }
  function p.event(_, data)
    if data == "[DONE]" then
      p.done = true
      return nil
    end
    local d = json.decode(data)
    if type(d) ~= "table" then
      p.bad = "stream event is not JSON: " .. data:sub(1, 80)
      return nil
    end
    if d.error ~= nil or d.object == "error" then
      p.error = errors.message_of(d) or "the server reported an error mid-stream"
      local e = type(d.error) == "table" and d.error or d
      p.error_status = tonumber(e.code)
      return nil
    end
    if type(d.model) == "string" then model = d.model end
    if type(d.usage) == "table" then usage = d.usage end
    local c = type(d.choices) == "table" and d.choices[1]
    if type(c) ~= "table" then return nil end
    if type(c.finish_reason) == "string" then finish = c.finish_reason end
    local delta = type(c.delta) == "table" and c.delta or {}
    local thought = delta.reasoning_content or delta.reasoning
    local text = type(delta.content) == "string" and delta.content or ""
    if (type(thought) == "string" and thought ~= "") or text ~= "" then p.deltas = p.deltas + 1 end
    if text ~= "" then
      parts[#parts + 1] = text
      return text
    end
    return type(thought) == "string" and thought ~= "" and "" or nil
  end
  function p.tokens() return p.deltas end
  function p.result()
    if not p.done and not finish then
      return nil, "stream ended before the reply did (no finish_reason, no [DONE]; "
        .. #table.concat(parts) .. " characters received)"
    end
    local parsed = M.parse({ choices = { { message = { content = table.concat(parts) }, finish_reason = finish } },
                             usage = usage, model = model })
    parsed.usage_reported = usage ~= nil
    return parsed
  end
  return p
end

return M
