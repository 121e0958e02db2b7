-- Writes kagent-rt's man page (roff) from the --help texts of the runtime and of every entry point
-- (agents/*.lua), so the page says what the binary says.
--   kagent-rt scripts/gen_man.lua OUT.1
-- Run by the build (cmake/Install.cmake); nothing in the page is written by hand but its frame.
local fs, proc = kagent.fs, kagent.proc

local out = kagent.args[1]
if not out then
  io.stderr:write("usage: kagent-rt scripts/gen_man.lua OUT.1\n")
  return 2
end
-- this binary (a child started from /proc/self/exe runs the same program)
local self = "/proc/self/exe"
local function run(argv)
  local r = proc.run(argv, { timeout = 60 })
  return r and r.code == 0 and r.stdout or nil
end

-- roff(text) -> text safe in a no-fill block: backslashes doubled, a leading . or ' escaped
local function roff(text)
  text = text:gsub("\\", "\\e")
  return (text:gsub("\n([.'])", "\n\\&%1"):gsub("^([.'])", "\\&%1"))
end

local runtime = assert(run({ self, "--help" }), "kagent-rt --help failed")
local version = (run({ self, "--version" }) or ""):match("(%d+%.%d+%.%d+)") or ""
local parts = {
  string.format('.TH KAGENT-RT 1 "" "kagent-rt %s" "User Commands"', version),
  ".SH NAME", "kagent-rt \\- an embedded LuaJIT runtime in which LLM agents make GPU kernels faster",
  ".SH SYNOPSIS", ".B kagent-rt", "[\\fIoptions\\fR] \\fISCRIPT.lua\\fR [\\fIscript arguments\\fR]",
  ".SH DESCRIPTION", ".nf", roff((runtime:gsub("%s+$", ""))), ".fi",
}
for _, path in ipairs(kagent.files("agents", ".lua")) do
  local name = "agents/" .. path:match("([^/]+)$")
  local text = run({ self, "--env-file", "/dev/null", name, "--help" })
  if text and text:find("usage:", 1, true) then
    parts[#parts + 1] = ".SH " .. name:upper()
    parts[#parts + 1] = ".nf"
    parts[#parts + 1] = roff((text:gsub("%s+$", "")))
    parts[#parts + 1] = ".fi"
  end
end
parts[#parts + 1] = ".SH SEE ALSO"
parts[#parts + 1] = "/usr/share/doc/kagent-rt/ (README.md, agents.md, lua-api.md, install.md)"
local ok, err = fs.write(out, table.concat(parts, "\n") .. "\n")
if not ok then io.stderr:write(tostring(err) .. "\n"); return 1 end
return 0
