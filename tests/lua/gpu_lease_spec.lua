-- kagent.gpu.lease: a device's shared/exclusive lease, with tasks standing in for workers (the
-- pool's use of it with real worker processes is in gpu_lease_cpu_spec.lua).
local lease_mod = require("kagent.gpu.lease")
local task = kagent.task

local SHARED, EXCLUSIVE = lease_mod.SHARED, lease_mod.EXCLUSIVE

-- a task that takes the lease for `key` in `mode`, logs when it got it, holds it for `hold`
-- seconds (or until it is killed) and gives it back
local function holder(l, log, key, mode, hold)
  return task.spawn(function()
    l:acquire(key, mode)
    log[#log + 1] = key
    task.sleep(hold)
    l:release(key)
  end)
end

describe("the GPU lease", function()
  it("lets shared holders in together and keeps an exclusive one alone", function()
    local l, log = lease_mod.new(), {}
    local a = holder(l, log, "a", SHARED, 0.2)
    local b = holder(l, log, "b", SHARED, 0.5)
    task.sleep(0.05)
    expect.eq(l:mode_of("a"), SHARED)
    expect.eq(l:mode_of("b"), SHARED, "a second shared holder is let in beside the first")
    local x = holder(l, log, "x", EXCLUSIVE, 0.2)
    task.sleep(0.05)
    expect.eq(l:mode_of("x"), nil, "exclusive waits while shared holders remain")
    task.wait(a)
    expect.eq(l:mode_of("x"), nil, "and while one of them still holds")
    task.wait(b)
    task.sleep(0)
    expect.eq(l:mode_of("x"), EXCLUSIVE)
    local c = holder(l, log, "c", SHARED, 0)
    task.sleep(0.05)
    expect.eq(l:mode_of("c"), nil, "shared waits while exclusive holds")
    task.wait(x)
    task.wait(c)
    expect.eq(table.concat(log, ","), "a,b,x,c")
  end)

  it("does not let a stream of shared requests starve an exclusive one", function()
    local l, log = lease_mod.new(), {}
    local streams = {}
    -- two streams of overlapping shared holds: at no moment is nobody holding shared
    for s = 1, 2 do
      streams[s] = task.spawn(function()
        task.sleep(0.05 * (s - 1))
        for k = 1, 10 do
          local key = "s" .. s .. "." .. k
          l:acquire(key, SHARED)
          log[#log + 1] = key
          task.sleep(0.1)
          l:release(key)
        end
      end)
    end
    task.sleep(0.12)
    local waited = l:acquire("x", EXCLUSIVE)
    log[#log + 1] = "x"
    l:release("x")
    task.all(streams)
    local at
    for i, k in ipairs(log) do if k == "x" then at = i end end
    expect.lt(waited, 0.5, "exclusive waits only for the holds before it")
    expect.lt(at, 8, "exclusive was granted early in the streams, not after them: " .. table.concat(log, ","))
  end)

  it("serves exclusive requests in the order they came", function()
    local l, log = lease_mod.new(), {}
    l:acquire("first", EXCLUSIVE)
    local ts = {}
    for i = 1, 4 do
      ts[i] = holder(l, log, "e" .. i, EXCLUSIVE, 0.01)
      task.sleep(0.01)
    end
    l:release("first")
    task.all(ts)
    expect.eq(table.concat(log, ","), "e1,e2,e3,e4")
  end)

  it("takes back what a key holds, in either mode, and passes over a killed waiter", function()
    local l, log = lease_mod.new(), {}
    l:acquire("dead-shared", SHARED)
    local killed = holder(l, log, "killed", EXCLUSIVE, 0)
    task.sleep(0.02)
    task.kill(killed)
    local s = holder(l, log, "s", SHARED, 0)
    task.sleep(0.02)
    expect.eq(#log, 1, "a shared request behind a killed exclusive one is not kept waiting")
    l:release("dead-shared")  -- what the pool does when a worker dies
    local x = holder(l, log, "x", EXCLUSIVE, 10)
    task.sleep(0.02)
    expect.eq(l:mode_of("x"), EXCLUSIVE)
    task.kill(x)
    l:release("x")
    expect.eq(l:acquire("y", SHARED), 0, "nothing is held once the dead holders are released")
    l:release("y")
    task.wait(s)
  end)

  it("changes a holder's mode by giving back the other first", function()
    local l = lease_mod.new()
    l:acquire("w", SHARED)
    expect.eq(l:acquire("w", SHARED), 0)
    l:acquire("w", EXCLUSIVE)
    expect.eq(l:mode_of("w"), EXCLUSIVE)
    expect.eq(l.shared, 0)
    l:release("w")
    l:release("w")
    expect.eq(l.exclusive, false)
    expect.errors(function() l:acquire("w", "both") end, "mode must be")
  end)

  it("turns an exclusive hold into a shared one at once, ahead of the exclusive requests queued", function()
    local l, log = lease_mod.new(), {}
    l:acquire("w", EXCLUSIVE)
    local x = holder(l, log, "x", EXCLUSIVE, 0)
    local s = holder(l, log, "s", SHARED, 0)
    task.sleep(0.05)
    expect.eq(l:acquire("w", SHARED), 0, "the holder does not wait behind x")
    expect.eq(l:mode_of("w"), SHARED)
    expect.eq(l.exclusive, false)
    task.sleep(0.05)
    expect.eq(l:mode_of("x"), nil, "x still waits: w holds shared")
    expect.eq(#log, 0, "and s waits behind x, in order")
    l:release("w")
    task.wait(x)
    task.wait(s)
    expect.eq(table.concat(log, ","), "x,s")
  end)
end)
