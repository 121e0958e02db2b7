-- Fallback kernel fingerprint when the evaluator gives none: a hash of the source with comments,
-- blank lines and trailing spaces removed, so reformatting does not make a "new" kernel.
local M = {}

local bit = require("bit")

local function fnv1a(s)
  local a, b = 2166136261, 0
  for i = 1, #s do
    local c = s:byte(i)
    a = bit.tobit(bit.bxor(a, c) * 16777619)
    b = bit.tobit(bit.bxor(b + c, bit.rol(a, 7)) * 0x01000193)
  end
  return string.format("%08x%08x", bit.band(a, 0xffffffff) % 2^32, bit.band(b, 0xffffffff) % 2^32)
end

function M.normalize(code)
  local lines = {}
  for line in (code or ""):gmatch("[^\n]*") do
    local l = line:gsub("%s+#[^\"']*$", ""):gsub("^%s*#.*$", ""):gsub("%s+$", "")
    if l ~= "" then lines[#lines + 1] = l end
  end
  return table.concat(lines, "\n")
end

-- of(code) -> "src:<hex>"
function M.of(code)
  return "src:" .. fnv1a(M.normalize(code))
end

M.hash = fnv1a

return M
