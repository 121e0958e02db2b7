-- The text form of the LLM timeouts, shared by KAGENT_LLM_TIMEOUT, llm.configure{timeout="..."}
-- and the agents' --llm-timeout: "SECONDS" (the total per call) or a comma-separated list of
-- total=DUR, idle=DUR, connect=DUR, start=DUR, where DUR is seconds with an optional unit (90, 90s,
-- 10m, 1h).
local M = {}

M.FORMAT = "SECONDS, or total=DUR,idle=DUR,connect=DUR,start=DUR (DUR: 90, 90s, 1.5m, 1h)"

local UNITS = { [""] = 1, s = 1, m = 60, h = 3600 }
local FIELDS = { total = "timeout", idle = "idle_timeout", connect = "connect_timeout", start = "start_timeout" }

--- parse(text) -> {timeout=, idle_timeout=, connect_timeout=, start_timeout=} (the parts given), or nil, why.
function M.parse(text)
  if type(text) ~= "string" then return nil, "expected a string (" .. M.FORMAT .. ")" end
  local out = {}
  for item in (text .. ","):gmatch("([^,]*),") do
    item = item:match("^%s*(.-)%s*$")
    local part, dur = item:match("^(%a+)%s*=%s*(.*)$")
    if not part then part, dur = "total", item end
    local field = FIELDS[part:lower()]
    if not field then
      return nil, "unknown part '" .. part .. "' in '" .. text .. "' (expected " .. M.FORMAT .. ")"
    end
    local num, unit = dur:match("^([%d%.]+)%s*(%a*)$")
    local n, scale = tonumber(num or ""), UNITS[(unit or ""):lower()]
    if not n or not scale or n <= 0 then
      return nil, "bad duration '" .. dur .. "' in '" .. text .. "' (expected " .. M.FORMAT .. ")"
    end
    if out[field] then
      return nil, part .. " is given twice in '" .. text .. "' (expected " .. M.FORMAT .. ")"
    end
    out[field] = n * scale
  end
  return out
end

return M
