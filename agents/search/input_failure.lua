-- Why the input kernel failed, said so a user can act on it (agents/search/driver.lua): the file,
-- the line (a syntax error's, or the kernel's own frame in a load error's traceback) with its
-- text, the classes the file defines (the evaluator wants ModelNew or kernel_function), and for
-- a Triton kernel in CPU mode that Triton needs a GPU.
local M = {}

-- classes(code) -> the names of the classes the source defines at its top level, in order
function M.classes(code)
  local out = {}
  for name in ("\n" .. tostring(code or "")):gmatch("\nclass%s+([%a_][%w_]*)") do out[#out + 1] = name end
  return out
end

-- line_of(r) -> the kernel's line the failure points at, or nil: a syntax finding's line, else the
-- last frame in the candidate's file (the evaluator loads it as candidate_<random>.py) of the traceback
function M.line_of(r)
  for _, f in ipairs(type(r.audit) == "table" and r.audit.static_findings or {}) do
    if f.rule == "syntax_error" and tonumber(f.line) then return tonumber(f.line) end
  end
  local last
  for n in tostring(r.traceback or ""):gmatch('File "[^"]*/candidate_[^"/]*%.py", line (%d+)') do last = tonumber(n) end
  return last
end

-- triton_on_cpu(code, r) -> whether a Triton kernel was run in CPU mode (where torch has no
-- Triton backend and the evaluator no GPU)
function M.triton_on_cpu(code, r)
  if r.device ~= "cpu" then return false end
  if tostring(r.error):find("No module named 'triton", 1, true) then return true end
  local src = "\n" .. tostring(code or "")
  return src:find("\n%s*import%s+triton") ~= nil or src:find("\n%s*from%s+triton[%s%.]") ~= nil
end

-- message(label, code, r) -> one paragraph: "the input kernel FILE fails at stage S, line N (TEXT):
-- ERROR (classes found: A, B)", and what to do where that is known
function M.message(label, code, r)
  local where = string.format("the input kernel %s fails at stage %s", tostring(label or "?"), tostring(r.stage))
  local line = (r.stage == "load" or r.stage == "audit") and M.line_of(r) or nil
  if line then
    local lines = {}
    for l in (tostring(code or "") .. "\n"):gmatch("([^\n]*)\n") do lines[#lines + 1] = l end
    local text = lines[line] and lines[line]:gsub("^%s+", ""):gsub("%s+$", "")
    where = where .. string.format(", line %d", line) .. ((text and text ~= "") and (" (" .. text:sub(1, 80) .. ")") or "")
  end
  local msg = where .. ": " .. tostring(r.error)
  if r.stage == "load" or r.stage == "audit" then
    local found = M.classes(code)
    msg = msg .. string.format(" (classes found in the file: %s)", #found > 0 and table.concat(found, ", ") or "none")
  end
  if M.triton_on_cpu(code, r) then
    msg = msg .. ". Triton kernels need a GPU: CPU mode (--devices cpu) runs PyTorch and C++ kernels; "
      .. "run on a GPU, or start from a PyTorch kernel"
  end
  return msg
end

return M
