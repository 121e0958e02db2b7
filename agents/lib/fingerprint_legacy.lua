-- The hash kagent-rt wrote into memory databases before fingerprints became SHA-256: 16 hex
-- digits from two mixed 32-bit lanes. It was documented as FNV-1a but is not (doubles drop the
-- low bits of the multiply: "hello" gives 0a3a3856..., FNV-1a gives 4f9f2cab). Kept only so
-- agents/run/memory.lua can recognise and rewrite those rows; nothing new is hashed with it.
local bit = require("bit")

local M = {}

function M.hash(s)
  local a, b = 2166136261, 0
  for i = 1, #s do
    local c = s:byte(i)
    a = bit.tobit(bit.bxor(a, c) * 16777619)
    b = bit.tobit(bit.bxor(b + c, bit.rol(a, 7)) * 0x01000193)
  end
  return string.format("%08x%08x", bit.band(a, 0xffffffff) % 2^32, bit.band(b, 0xffffffff) % 2^32)
end

-- of(normalized code) -> "src:<16 hex>" as stored in source_hash columns
function M.of(normalized)
  return "src:" .. M.hash(normalized)
end

return M
