-- kagent.gpu, a worker's log: what a worker writes to stderr (candidate prints, tracebacks:
-- untrusted) goes to its log file redacted (kagent.secrets), in lines of at most MAX_LOG_LINE
-- bytes (the head of a longer one, then how much was dropped). The stream is taken at most 4 MiB
-- at a time (the rest is dropped by proc), and every step is linear in what arrived, so no output
-- stalls the event loop.
local fs = require("kagent.fs")
local secrets = require("kagent.secrets")

local M = {}

M.MAX_LOG_LINE = 65536
-- bytes held back from the end of a cut line's head: a secret that straddles the cut is never
-- written in part (the head is redacted whole first)
local SECRET_MARGIN = 512

local function cut_line(line)
  local head = secrets.redact(line:sub(1, M.MAX_LOG_LINE))
  head = head:sub(1, math.max(0, #head - SECRET_MARGIN))
  return head, #line - (M.MAX_LOG_LINE - SECRET_MARGIN)
end

-- capped(text) -> whole lines (text ends with "\n" or is empty), each over MAX_LOG_LINE cut to
-- its head, redacted
local function capped(text)
  if #text <= M.MAX_LOG_LINE then return secrets.redact(text) end
  local out = {}
  for line in text:gmatch("([^\n]*)\n") do
    if #line > M.MAX_LOG_LINE then
      local head, dropped = cut_line(line)
      out[#out + 1] = string.format("%s [kagent-rt: %d more bytes of this line dropped]", head, dropped)
    else
      out[#out + 1] = secrets.redact(line)
    end
  end
  out[#out + 1] = ""
  return table.concat(out, "\n")
end

--- drain(w, final): appends what worker `w` wrote to stderr to its log file (w.log_path), redacted.
--- Only whole lines go out (the rest waits in w.stderr_carry for the next call), so a secret is
--- never cut in two; a line still arriving past MAX_LOG_LINE has its head written and the rest of
--- it dropped as it comes (w.stderr_skip). `final`: the worker is gone, write what is left.
function M.drain(w, final)
  local chunk, dropped = w.proc:take_stderr()
  local out = {}
  if w.stderr_skip then  -- the rest of a line whose head was written
    local nl = chunk:find("\n", 1, true)
    if not nl then
      w.stderr_skip, chunk = w.stderr_skip + #chunk, ""
    else
      out[#out + 1] = string.format("[kagent-rt: %d more bytes of that line dropped]\n", w.stderr_skip + nl - 1)
      w.stderr_skip, chunk = nil, chunk:sub(nl + 1)
    end
  end
  local text = (w.stderr_carry or "") .. chunk
  if final and text ~= "" and text:sub(-1) ~= "\n" then text = text .. "\n" end
  -- the last newline, found in one pass (a pattern that backtracks from every start would take
  -- time in the square of a long line's length)
  local cut = (text:find("\n[^\n]*$")) or 0
  local rest = text:sub(cut + 1)
  out[#out + 1] = capped(text:sub(1, cut))
  if #rest > M.MAX_LOG_LINE then
    local head, _ = cut_line(rest)
    out[#out + 1] = head .. " [kagent-rt: the rest of this line is dropped]\n"
    w.stderr_skip, rest = 0, ""
  end
  w.stderr_carry = rest
  if dropped > 0 then out[#out + 1] = string.format("[kagent-rt: %d bytes of stderr dropped]\n", dropped) end
  local text_out = table.concat(out)
  if w.log_path and text_out ~= "" then fs.append(w.log_path, text_out) end
end

return M
