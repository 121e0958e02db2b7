-- Long-term memory across runs: two separate kagent-rt processes run on the same problem and
-- database; the second must see the first run's lesson and archived kernel.
local proc, fs, json = kagent.proc, kagent.fs, kagent.json

local function binary()
  local exe = spec.build_dir .. "/kagent-rt"
  if not fs.exists(exe) then exe = kagent.root .. "/build/kagent-rt" end
  return exe
end

local function run_once(path, label, time_ms)
  local res = assert(proc.run({ binary(), "--log-level", "error",
    fs.join(kagent.root, "tests/mem/run_once.lua"), path, label, tostring(time_ms) }, { timeout = 30 }))
  expect.eq(res.code, 0, "run_once exit code (stderr: " .. tostring(res.stderr) .. ")")
  return assert(json.decode(res.stdout:match("[^\n]+")))
end

describe("kagent.mem across runs", function()
  it("a second run sees the first run's lessons and archived kernel", function()
    local dir = spec.tmpdir("mem-runs")
    local path = fs.join(dir, "k.db")
    local first = run_once(path, "run-A", 2.5)
    expect.eq(first.best_source, nil, "a fresh database has no archived kernel")
    expect.eq(#first.lessons, 0, "a fresh database has no lessons")

    local second = run_once(path, "run-B", 1.5)
    expect.eq(second.best_source, "# kernel from run-A")
    expect.eq(second.best_time_ms, 2.5)
    expect.eq(#second.lessons, 1)
    expect.match(second.lessons[1], "run%-A")

    -- The third run starts from the faster kernel of the second and sees both lessons.
    local third = run_once(path, "run-C", 3.0)
    expect.eq(third.best_source, "# kernel from run-B")
    expect.eq(#third.lessons, 2)
    proc.run({ "rm", "-rf", dir })
  end, { timeout = 60 })
end)
