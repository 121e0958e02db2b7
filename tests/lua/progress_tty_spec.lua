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

-- A line far wider than 80 columns; the terminal is then narrowed to 60 (stty on the pty sends
-- SIGWINCH) and the line redrawn.
local WIDE_SCRIPT = [[
local p = require("agents.run.progress").new({ rounds = 5 })
p:update({ round = 1, workers = 4, busy = 2, best_ms = 0.0859, speedup_eager = 1.23, speedup_compile = 0.9,
  sol_pct = 41, tokens = 123456, tokens_per_s = 55, llm_failures = 2, replies = "replies 12 (1 re-asked) rules 25%" })
kagent.log.info("LOGLINE at 80")
local resized = os.execute("stty cols 60 <&2")
assert(resized == 0 or resized == true, "stty cols 60 failed")
kagent.log.info("RESIZED to 60")
p:update({ busy = 3 })
kagent.log.info("LOGLINE at 60")
p:finish("the end")
]]

-- The same wide line with no tick for 60 s: only the resize (SIGWINCH) can redraw it, and the
-- script waits (up to 10 s) until the line it drew last is another.
local RESIZE_SCRIPT = [[
local p = require("agents.run.progress").new({ rounds = 5, tick_s = 60 })
p:update({ round = 1, workers = 4, busy = 2, best_ms = 0.0859, speedup_eager = 1.23, speedup_compile = 0.9,
  sol_pct = 41, tokens = 123456, tokens_per_s = 55, llm_failures = 2, replies = "replies 12 (1 re-asked) rules 25%" })
local before = p.last
local resized = os.execute("stty cols 60 <&2")
assert(resized == 0 or resized == true, "stty cols 60 failed")
for _ = 1, 200 do
  if p.last ~= before then break end
  kagent.task.sleep(0.05)
end
kagent.log.info(p.last ~= before and ("REDRAWN at " .. #p.last .. " columns") or "NOT REDRAWN")
p:finish("the end")
]]

local function script_file(dir, text)
  local path = dir .. "/progress_demo.lua"
  assert(fs.write(path, text or SCRIPT))
  return path
end

-- drawn(raw) -> every stretch of text the terminal was sent between line starts ("\r", "\n"),
-- erase codes removed: each status line as drawn, and each log line
local function drawn(raw)
  local out = {}
  for piece in (raw:gsub("\27%[K", "") .. "\n"):gmatch("([^\r\n]*)[\r\n]") do
    if piece ~= "" then out[#out + 1] = piece end
  end
  return out
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

  it("fs.term_columns: the terminal's width, nil for a pipe", function()
    local dir = spec.tmpdir("term-columns")
    local path = dir .. "/cols.lua"
    assert(fs.write(path, "print(tostring(kagent.fs.term_columns(1)) .. ' ' .. tostring(kagent.fs.term_columns(2)))"))
    local r = assert(proc.run({ BIN, path }, { timeout = 60 }))
    expect.eq(r.stdout, "nil nil\n", "stdout and stderr are pipes here")
    if proc.run({ "sh", "-c", "command -v script && command -v stty" }).code ~= 0 then skip("no script(1) or stty to make a terminal") end
    local raw = on_tty(string.format("stty cols 73 rows 30; '%s' '%s'", BIN, path), { TERM = "xterm" })
    expect.match(raw, "73 73", "the pty's width:\n" .. raw)
  end)

  it("fits the terminal's width, dropping whole fields, and follows a resize", function()
    local wide = progress.format({ round = 3, rounds = 5, t0 = 0, rounds1_t0 = 10, round_t0 = 30, busy = 2, workers = 4,
      best_ms = 0.0859, speedup_eager = 1.23, speedup_compile = 0.9, sol_pct = 41, tokens = 123456, tokens_per_s = 55,
      cost_usd = 0.1234, llm_failures = 2, replies = "replies 12 (1 re-asked) rules 25%" }, 35, 79)
    expect.truthy(#wide <= 79, wide)
    expect.eq(wide, "[round 3/5 35s] workers 2/4 busy | best 0.0859 ms 1.23x eager | LLM failures 2",
      "the least useful fields go first (rate, replies, cost, tokens, SOL, compile, estimate), none cut mid-word")
    if proc.run({ "sh", "-c", "command -v script && command -v stty" }).code ~= 0 then skip("no script(1) or stty to make a terminal") end
    local dir = spec.tmpdir("progress-width")
    local raw = on_tty(string.format("stty cols 80 rows 30; '%s' '%s'", BIN, script_file(dir, WIDE_SCRIPT)),
      { TERM = "xterm", KAGENT_PROGRESS = false, NO_COLOR = "1" })
    local resized, at80, at60 = false, 0, 0
    for _, piece in ipairs(drawn(raw)) do
      -- the line redrawn under "LOGLINE at 60" was drawn after the resize (under "RESIZED" it is
      -- the line drawn before, kept until the next update)
      if piece:find("LOGLINE at 60", 1, true) then resized = true end
      expect.truthy(#piece <= 80, "no line wider than 80 columns: " .. piece .. "\n" .. raw)
      if piece:find("best 0.0859 ms", 1, true) then
        if resized then
          at60 = at60 + 1
          expect.truthy(#piece < 60, "narrowed to 60 columns: " .. piece)
          expect.match(piece, "1%.23x eager", "the eager speedup stays")
        else
          at80 = at80 + 1
        end
      end
    end
    expect.truthy(at80 > 0 and at60 > 0, "the status line drawn before and after the resize:\n" .. raw)
  end)

  it("is redrawn at once when the terminal is resized, with no tick or update (SIGWINCH)", function()
    if proc.run({ "sh", "-c", "command -v script && command -v stty" }).code ~= 0 then skip("no script(1) or stty to make a terminal") end
    local dir = spec.tmpdir("progress-resize")
    local raw = on_tty(string.format("stty cols 80 rows 30; '%s' '%s'", BIN, script_file(dir, RESIZE_SCRIPT)),
      { TERM = "xterm", KAGENT_PROGRESS = false, NO_COLOR = "1" })
    local cols = tonumber(raw:match("REDRAWN at (%d+) columns"))
    expect.truthy(cols, "the line was redrawn after the resize:\n" .. raw)
    expect.truthy(cols < 60, "at the new width: " .. tostring(cols))
  end)

  it("fs.wait_resize: a waiting task wakes at SIGWINCH; a killed one is taken back", function()
    local task = kagent.task
    local pid = tonumber(assert(fs.read("/proc/self/stat")):match("^(%d+)"))
    local woke = 0
    task.spawn({ name = "resize-waiter", fn = function() fs.wait_resize(); woke = woke + 1 end })
    local killed = task.spawn({ name = "resize-killed", fn = function() fs.wait_resize(); woke = woke + 100 end })
    task.sleep(0.1)
    expect.eq(woke, 0, "no resize yet: both still wait")
    task.kill(killed)
    expect.eq(proc.run({ "kill", "-WINCH", tostring(pid) }).code, 0)
    for _ = 1, 200 do
      if woke > 0 then break end
      task.sleep(0.05)
    end
    expect.eq(woke, 1, "the waiting task woke, the killed one did not")
    local n = fs.resizes()
    expect.truthy(n >= 1, "the resize is counted")
    expect.eq(fs.wait_resize(n - 1), n, "a resize after the count a loop last saw returns at once")
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
