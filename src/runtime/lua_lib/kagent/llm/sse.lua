-- Server-sent events: an incremental decoder for a text/event-stream body that arrives in
-- chunks cut anywhere (mid-line, mid-event). Only the fields the LLM streams use are kept:
-- `event` and `data` (multi-line data joined with "\n"); comments (":") and `id`/`retry` are
-- skipped.
local M = {}

--- decoder(on_event) -> {feed(bytes), finish()}. on_event(name, data) runs for each complete
--- event, in order; name is "message" when the event has none. finish() delivers a last event
--- that the body ended without a blank line after.
function M.decoder(on_event)
  local rest = ""        -- an incomplete last line
  local name, data = nil, nil

  local function line(l)
    if l == "" then
      if data then on_event(name or "message", table.concat(data, "\n")) end
      name, data = nil, nil
      return
    end
    if l:byte(1) == 58 then return end -- ":" starts a comment (keep-alive)
    local colon = l:find(":", 1, true)
    local field, value
    if colon then
      field = l:sub(1, colon - 1)
      value = l:sub(colon + 1)
      if value:byte(1) == 32 then value = value:sub(2) end
    else
      field, value = l, ""
    end
    if field == "data" then
      data = data or {}
      data[#data + 1] = value
    elseif field == "event" then
      name = value
    end
  end

  local self = {}
  function self.feed(bytes)
    local text = rest .. bytes
    local pos = 1
    while true do
      local nl = text:find("\n", pos, true)
      if not nl then break end
      local e = nl - 1
      if e >= pos and text:byte(e) == 13 then e = e - 1 end -- CRLF
      line(text:sub(pos, e))
      pos = nl + 1
    end
    rest = text:sub(pos)
  end
  function self.finish()
    if rest ~= "" then
      line((rest:gsub("\r$", "")))
      rest = ""
    end
    line("")
  end
  return self
end

return M
