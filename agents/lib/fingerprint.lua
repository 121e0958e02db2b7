-- Fingerprints of problems and kernels: SHA-256 (kagent.sha256), the one hash scheme of the
-- project. A kernel's fallback fingerprint, used when the evaluator gives none, hashes the source
-- with comments, blank lines and trailing spaces removed, so reformatting does not make a "new"
-- kernel. Databases written with the earlier hash are brought over by agents/run/memory.lua.
local sha256 = require("kagent").sha256

local M = {}

-- hash(s) -> 64 lower-case hex digits
function M.hash(s)
  return sha256(s)
end

function M.normalize(code)
  local lines = {}
  for line in (code or ""):gmatch("[^\n]*") do
    local l = line:gsub("%s+#[^\"']*$", ""):gsub("^%s*#.*$", ""):gsub("%s+$", "")
    if l ~= "" then lines[#lines + 1] = l end
  end
  return table.concat(lines, "\n")
end

-- of(code) -> "src:<64 hex>"
function M.of(code)
  return "src:" .. sha256(M.normalize(code))
end

return M
