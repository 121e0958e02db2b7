-- The status line on a terminal (agents/run/progress.lua over kagent.log.status): log lines pass
-- above it, never onto its end; it shows the phase and the elapsed time; and where stderr is no
-- terminal it is plain lines with no control codes. The terminal is a pty from script(1).
local fs, proc = kagent.fs, kagent.proc
local progress = require("agents.run.progress")

local BIN = (os.getenv("KAGENT_BUILD_DIR") or (kagent.root .. "/build")) .. "/kagent-rt"

local SCRIPT = [[
local p = require("agents.run.progress").new({ rounds = 2 })
p:update({ phase = "baselines" })
kagent.log.info("LOGLINE one")
p:update({ phase = false, round = 1, workers = 2, busy = 1 })
kagent.task.sleep(1.2)
kagent.log.warn("LOGLINE two")
p:update({ best_ms = 0.25, busy = 0 })
p:finish("the end")
]]

local function script_file(dir)
  local path = dir .. "/progress_demo.lua"
  assert(fs.write(path, SCRIPT))
  return path
end

-- on_tty(cmd, env) -> what the pty received (script(1) runs cmd with its stdio on a pty)
local function on_tty(cmd, env)
  local r = assert(proc.run({ "script", "-qfec", cmd, "/dev/null" }, { env = env, timeout = 60 }))
  return r.stdout, r
end

-- shown(raw) -> the lines a terminal ends up showing: each "\r" returns to the line's start and
-- "\27[K" erases what follows, so what stays of a line is what was written after its last "\r"
local function shown(raw)
  local out = {}
  for line in (raw:gsub("\r\n", "\n") .. "\n"):gmatch("([^\n]*)\n") do
    local last = line:match("([^\r]*)$")
    out[#out + 1] = (last:gsub("\27%[K", ""))
  end
  return out
end

describe("the status line", function()
  it("formats elapsed time, the phase, and an estimate once a round has ended", function()
    expect.eq(progress.clock(42), "42s")
    expect.eq(progress.clock(185), "3m05s")
    expect.eq(progress.clock(3720), "1h02m")
    local s = { round = 3, rounds = 5, t0 = 0, rounds1_t0 = 10, round_t0 = 30 }
    -- two rounds took 20 s: three more (this one included) take 30 s, 5 of which have passed
    expect.near(progress.estimate(s, 35), 25, 1e-9)
    expect.match(progress.format(s, 35), "^%[round 3/5 35s, ~25s left%]")
    expect.eq(progress.estimate({ round = 1, rounds = 5, rounds1_t0 = 0, round_t0 = 0 }, 3), nil, "no estimate before a round ended")
    expect.match(progress.format({ phase = "confirmation", t0 = 0 }, 61), "^%[confirmation 1m01s%]")
  end)

  it("on a terminal: log lines pass above it, and it goes at the end", function()
    if proc.run({ "sh", "-c", "command -v script" }).code ~= 0 then skip("no script(1) to make a terminal") end
    local dir = spec.tmpdir("progress-tty")
    local raw = on_tty(string.format("'%s' '%s'", BIN, script_file(dir)), { TERM = "xterm", KAGENT_PROGRESS = false, NO_COLOR = "1" })
    local lines = shown(raw)
    local logs, status = 0, 0
    for _, l in ipairs(lines) do
      if l:find("LOGLINE", 1, true) then
        logs = logs + 1
        expect.match(l, "^%d%d%d%d%-%d%d%-%d%d [%d:.]+ %a+ +%[main%] LOGLINE", "a log line alone on its line: " .. l)
      end
      if l:find("workers", 1, true) then status = status + 1 end
    end
    expect.eq(logs, 2, "both log lines shown:\n" .. raw)
    expect.eq(status, 0, "no status line is left behind once finished:\n" .. raw)
    expect.truthy(raw:find("[baselines 0s]", 1, true), "the phase and elapsed time:\n" .. raw)
    expect.truthy(raw:find("%[round 1/2 [1-9]s%]"), "the clock moves between updates:\n" .. raw)
    expect.eq(lines[#lines] == "" and lines[#lines - 1] or lines[#lines], "the end")
    expect.falsy(raw:find("\27%[%d+m"), "NO_COLOR: no colour codes")
  end)

  it("elsewhere: one plain line per change, no control codes", function()
    local dir = spec.tmpdir("progress-lines")
    local r = assert(proc.run({ BIN, script_file(dir) }, { env = { KAGENT_PROGRESS = false }, timeout = 60 }))
    expect.eq(r.code, 0, r.stderr)
    expect.falsy(r.stderr:find("[\r\27]"), "no control codes:\n" .. r.stderr)
    expect.match(r.stderr, "\n%[round 1/2 %d+s%] workers 1/2 busy")
    expect.match(r.stderr, "LOGLINE two\n")
  end)
end)
