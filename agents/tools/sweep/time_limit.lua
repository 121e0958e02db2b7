-- A sweep's time limit per run (--time), in Slurm's formats, so one value means the same on this
-- machine and as sbatch --time: MINUTES, MINUTES:SECONDS, HOURS:MINUTES:SECONDS, DAYS-HOURS,
-- DAYS-HOURS:MINUTES, DAYS-HOURS:MINUTES:SECONDS; "UNLIMITED" or "INFINITE": none.
local M = {}

-- seconds(text) -> seconds (> 0), or false for no limit, or nil and why
function M.seconds(text)
  if text == nil then return false end
  local t = tostring(text)
  local upper = t:upper()
  if upper == "UNLIMITED" or upper == "INFINITE" then return false end
  local days, rest = t:match("^(%d+)%-(.+)$")
  local parts = {}
  for n in (rest or t):gmatch("[^:]+") do
    if not n:match("^%d+$") then parts = nil; break end
    parts[#parts + 1] = tonumber(n)
  end
  local s
  local body = rest or t
  if parts and #parts >= 1 and #parts <= 3 and not (body:find("::", 1, true) or body:match("^:") or body:match(":$")) then
    if days then  -- DAYS-HOURS[:MINUTES[:SECONDS]]
      s = tonumber(days) * 86400 + parts[1] * 3600 + (parts[2] or 0) * 60 + (parts[3] or 0)
    elseif #parts == 3 then
      s = parts[1] * 3600 + parts[2] * 60 + parts[3]
    else  -- MINUTES[:SECONDS]
      s = parts[1] * 60 + (parts[2] or 0)
    end
  end
  if not s or s <= 0 then
    return nil, string.format("--time %s: not a time limit (Slurm's formats: MINUTES, MM:SS, HH:MM:SS, "
      .. "D-HH, D-HH:MM, D-HH:MM:SS, or UNLIMITED)", t)
  end
  return s
end

return M
