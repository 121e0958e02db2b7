-- Writes one bash completion file for every shipped entry script (agents/*.lua), from their own
-- `--completion bash` output (agents/lib/args.lua): each script's function once, the dispatcher
-- they share once. Run by the build for the .deb:
--   kagent-rt scripts/gen_completion.lua OUT
local proc, fs = kagent.proc, kagent.fs

local out = kagent.args[1] or error("usage: kagent-rt scripts/gen_completion.lua OUT")
local MARK = "# kagent-rt runs many scripts:"

local parts, dispatch = {}, nil
for _, path in ipairs(kagent.files("agents", ".lua")) do
  local script = "agents/" .. fs.basename(path)
  local res = assert(proc.run({ kagent.exe, "--log-level", "off", "--env-file", "/dev/null", script,
    "--completion", "bash" }, { timeout = 60 }))
  if res.code ~= 0 then error(script .. " --completion bash exited " .. tostring(res.code) .. ": " .. res.stderr) end
  local at = res.stdout:find(MARK, 1, true) or error(script .. ": no dispatcher in its completion script")
  parts[#parts + 1] = res.stdout:sub(1, at - 1):gsub("^# bash completion[^\n]*\n", "# " .. script .. "\n")
  dispatch = dispatch or res.stdout:sub(at)
end
parts[#parts + 1] = dispatch
assert(fs.write(out, "# bash completion for kagent-rt and its entry scripts (scripts/gen_completion.lua)\n"
  .. table.concat(parts, "\n")))
