-- What a server said when it refused or failed a call, made safe to show: its own words from
-- the error shapes that providers and local servers use, and no API key in any of it.
local json = require("kagent.json")

local M = {}

local MAX_TEXT = 1000

local function clip(s)
  if #s > MAX_TEXT then return s:sub(1, MAX_TEXT) .. "..." end
  return s
end

--- message_of(decoded) -> the error message of a decoded error body or event, or nil. Shapes:
--- {"error": {"message"}} (OpenAI, Anthropic, llama.cpp, newer vLLM), {"error": "..."} (Ollama),
--- {"object": "error", "message"} (vLLM), {"detail": "..."} (FastAPI relays).
function M.message_of(d)
  if type(d) ~= "table" then return nil end
  local e = d.error
  if type(e) == "table" and type(e.message) == "string" then return clip(e.message) end
  if type(e) == "string" then return clip(e) end
  if type(d.message) == "string" then return clip(d.message) end
  if type(d.detail) == "string" then return clip(d.detail) end
end

--- server_text(body) -> the server's own words from an error body (JSON shapes above, else the
--- body as text with markup and runs of space removed, shortened), or nil when it said nothing.
function M.server_text(body)
  if type(body) ~= "string" or body == "" then return nil end
  local said = M.message_of(json.decode(body))
  if said then return said end
  local text = body:gsub("<[^>]*>", " "):gsub("%s+", " "):match("^%s*(.-)%s*$")
  if text == "" then return nil end
  if #text > 300 then text = text:sub(1, 300) .. "..." end
  return text
end

--- scrub(text, key) -> text without the API key, nor anything shaped like a secret key.
function M.scrub(text, key)
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

return M
