-- Writes the man page kagent-rt(1) from the help texts themselves (the runtime's --help and the
-- main job's --help), so the page says what the binary says. Run by the build:
--   kagent-rt scripts/gen_man.lua OUT.1
local proc, fs = kagent.proc, kagent.fs

local out = kagent.args[1] or error("usage: kagent-rt scripts/gen_man.lua OUT.1")

local function help(argv)
  local res = assert(proc.run(argv, { timeout = 60 }))
  if res.code ~= 0 then error(table.concat(argv, " ") .. " exited " .. tostring(res.code) .. ": " .. res.stderr) end
  return res.stdout
end

-- roff: backslashes escaped, hyphens that are options made minus signs, no line starting a request
local function roff(text)
  local lines = {}
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    line = line:gsub("\\", "\\e"):gsub("%-", "\\-")
    if line:match("^[.']") then line = "\\&" .. line end
    lines[#lines + 1] = line
  end
  return table.concat(lines, "\n")
end

local env = { "--log-level", "off", "--env-file", "/dev/null" }
local runtime = help({ kagent.exe, "--help" })
local beam = help({ kagent.exe, env[1], env[2], env[3], env[4], "agents/beam.lua", "--help" })
local entries = {}
for _, p in ipairs(kagent.files("agents", ".lua")) do entries[#entries + 1] = "agents/" .. fs.basename(p) end

local page = table.concat({
  '.TH KAGENT\\-RT 1 "" "kagent-rt ' .. kagent.version .. '" "User Commands"',
  ".SH NAME",
  "kagent\\-rt \\- run LLM agents, written in Lua, that make GPU kernels faster",
  ".SH SYNOPSIS",
  ".B kagent\\-rt",
  "[\\fIOPTIONS\\fR] \\fISCRIPT\\fR [\\fISCRIPT ARGUMENTS\\fR]",
  ".br",
  ".B kagent\\-rt agents/beam.lua \\-\\-problem",
  "\\fIPROBLEM.py\\fR [\\fB\\-\\-kernel\\fR \\fIKERNEL.py\\fR] [\\fIoptions\\fR]",
  ".SH DESCRIPTION",
  ".nf",
  roff(runtime),
  ".fi",
  ".SH ENTRY SCRIPTS",
  "Each takes \\fB\\-\\-help\\fR. Shipped: " .. table.concat(entries, ", "):gsub("%-", "\\-") .. ".",
  ".SH THE MAIN JOB",
  ".nf",
  roff(beam),
  ".fi",
  ".SH FILES",
  ".TP",
  ".I runs/",
  "run folders (every prompt, reply, kernel and figure), runs/kagent.db (memory), runs/index.html",
  ".TP",
  ".I ${KAGENT_HOME:\\-${XDG_DATA_HOME:\\-~/.local/share}/kagent\\-rt}/",
  "the user's agents, policies, roles, skills and prompts, which shadow the installed ones",
  ".SH SEE ALSO",
  "The scripting contract and the agents' guide: /usr/share/doc/kagent\\-rt/lua\\-api.md, agents.md.",
  "",
}, "\n")
assert(fs.write(out, page))
