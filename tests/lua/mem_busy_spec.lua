-- A database another process holds locked (an exclusive transaction of python3's sqlite3, as a
-- second kagent-rt or a sqlite3 shell would): a write waits for it off the event loop (the
-- calling task sleeps, other tasks run) and lands once the lock is released; one that cannot be
-- written within its bound (mem.open's busy_wait) fails with EDB naming the file. A ticker task
-- shows the loop ran while the write waited: it ticks between the write's start and its return.
local mem, proc, task, fs = kagent.mem, kagent.proc, kagent.task, kagent.fs
local now = kagent.time.now

-- The holder: takes an exclusive transaction on `path`, says "locked", holds it `hold` seconds,
-- commits and says "released".
local HOLDER = [[
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
c.execute("COMMIT")
print("released", flush=True)
]]

local function hold(path, seconds)
  local p = assert(proc.spawn({ "python3", "-c", HOLDER, path, tostring(seconds) }))
  expect.eq(p:read_line(30), "locked", "the holder took the lock")
  return p
end

-- ticker() -> state {ticks}: a task that counts ticks of 20 ms until state.stop
local function ticker()
  local st = { ticks = 0 }
  st.task = task.spawn(function()
    while not st.stop do
      task.sleep(0.02)
      st.ticks = st.ticks + 1
    end
  end)
  return st
end

describe("kagent.mem and a database another process holds locked", function()
  it("writes wait off the loop and every row lands once the lock is released", function()
    local path = fs.join(spec.tmpdir("mem-busy"), "k.db")
    local db = assert(mem.open(path))
    local run_id = assert(db:start_run({ problem = "p" }))
    -- 8 s: longer than the 5 s busy timeout SQLite slept on the loop's thread before it failed
    local holder = hold(path, 8)
    local tick = ticker()
    local ids = {}
    for i = 1, 3 do ids[i] = db:add_attempt({ run_id = run_id, round = 1, worker = tostring(i) }) end
    local in_tx = db:transaction(function(d)
      return d:add_attempt({ run_id = run_id, round = 2, worker = "1" })
    end)
    local ticked = tick.ticks
    tick.stop = true
    -- the order: the holder released before the first write returned, and the loop ran meanwhile
    expect.eq(holder:read_line(5), "released", "the writes returned after the holder released its lock")
    holder:wait(10)
    for i = 1, 3 do expect.truthy(ids[i], "attempt " .. i .. " written") end
    expect.truthy(in_tx, "the transaction's write landed")
    expect.eq(db:query("SELECT count(*) AS n FROM attempts WHERE run_id = ?", { run_id })[1].n, 4, "no row lost")
    -- the loop was not blocked: the ticker ran while the writes waited (it ticks every 20 ms of
    -- an 8 s hold; a loop stalled in SQLite's busy handler lets it tick at most once)
    expect.truthy(ticked >= 10, "the ticker ticked " .. ticked .. " time(s) while the writes waited")
    db:close()
  end, { timeout = 120 })

  it("a write that cannot be made within busy_wait fails with EDB naming the file, without blocking", function()
    local path = fs.join(spec.tmpdir("mem-busy-bound"), "k.db")
    local db = assert(mem.open(path, { busy_wait = 0.5 }))
    local run_id = assert(db:start_run({ problem = "p" }))
    local holder = hold(path, 60)
    local tick = ticker()
    local id, err, code = db:add_attempt({ run_id = run_id, round = 1 })
    local ticked = tick.ticks
    tick.stop = true
    local released = holder:read_line(0.1)
    holder:kill("KILL")
    holder:wait(10)
    expect.eq(id, nil, "no id while locked")
    expect.eq(code, "EDB", tostring(err))
    expect.truthy(tostring(err):find(path, 1, true), "names the database: " .. tostring(err))
    expect.truthy(tostring(err):find("locked", 1, true), "says it is locked: " .. tostring(err))
    expect.eq(released, nil, "it failed while the holder still held the lock (after its bound, not the hold)")
    expect.truthy(ticked >= 3, "the ticker ticked " .. ticked .. " time(s) while the write waited")
    -- the lock gone, the same database takes the write
    expect.truthy(db:add_attempt({ run_id = run_id, round = 1 }), "written once the lock is released")
    db:close()
  end, { timeout = 120 })

  it("busy_wait is checked", function()
    expect.errors(function() mem.open(":memory:", { busy_wait = -1 }) end, "busy_wait")
  end)
end)
