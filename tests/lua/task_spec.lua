-- kagent.task: scheduling, waiting, killing, semaphores, conditions, errors.
local task, time = kagent.task, kagent.time

describe("task", function()
  it("runs 1000 sleeping tasks concurrently", function()
    local t0 = time.now()
    local list = {}
    for i = 1, 1000 do list[i] = task.spawn(function() task.sleep(0.5) return i * 2 end) end
    local r = task.all(list)
    local dt = time.now() - t0
    expect.eq(#r, 1000)
    expect.eq(r[1000][1], 2000)
    expect.truthy(r[1].ok)
    expect.lt(dt, 1.0, "wall time of 1000 x 0.5 s sleeps")
  end)

  it("wait returns results or the error with a traceback", function()
    local ok, a, b = task.wait(task.spawn(function(x) return x, "y" end, "x"))
    expect.eq(ok, true); expect.eq(a, "x"); expect.eq(b, "y")
    local ok2, err = task.wait(task.spawn(function() error("boom") end))
    expect.eq(ok2, false)
    expect.match(err, "task_spec.lua:%d+: boom")
    expect.match(err, "stack traceback")
  end)

  it("an error in one task leaves its siblings running", function()
    local sib = task.spawn(function() task.sleep(0.05) return "alive" end)
    task.spawn(function() error("dies") end)
    local ok, v = task.wait(sib)
    expect.eq(ok, true); expect.eq(v, "alive")
  end)

  it("all() keeps input order and honours limit", function()
    local running, peak = 0, 0
    local fns = {}
    for i = 1, 10 do
      fns[i] = function()
        running = running + 1; peak = math.max(peak, running)
        task.sleep(0.01 * (11 - i))
        running = running - 1
        if i == 5 then error("five") end
        return i
      end
    end
    local r = task.all(fns, { limit = 3 })
    expect.eq(peak, 3, "peak concurrency")
    expect.eq(r[1][1], 1); expect.eq(r[10][1], 10)
    expect.eq(r[5].ok, false); expect.match(r[5][1], "five")
  end)

  it("any() returns the first task to finish, then the next, in finishing order", function()
    local list = {}
    for i, d in ipairs({ 0.06, 0.02, 0.04 }) do
      list[i] = task.spawn(function() task.sleep(d) if i == 3 then error("third") end return "r" .. i end)
    end
    local i, ok, v = task.any(list)
    expect.eq(i, 2); expect.eq(ok, true); expect.eq(v, "r2")
    local rest = { list[1], list[3] }
    i, ok, v = task.any(rest)
    expect.eq(i, 2, "the third task, second in the rest"); expect.eq(ok, false); expect.match(v, "third")
    i, ok, v = task.any({ list[1] })
    expect.eq(i, 1); expect.eq(v, "r1")
    -- all finished: the lowest index at once
    i, ok, v = task.any(list)
    expect.eq(i, 1); expect.eq(v, "r1")
    expect.errors(function() task.any({}) end, "non%-empty list")
    expect.errors(function() task.any({ 1 }) end, "not a task")
  end)

  it("any() wakes once when several tasks finish in the same turn, and a killed waiter unhooks", function()
    local a = task.spawn(function() task.sleep(0.02) return "a" end)
    local b = task.spawn(function() task.sleep(0.02) return "b" end)
    local woke = 0
    local waiter = task.spawn(function() local i = task.any({ a, b }); woke = woke + 1; task.sleep(0.05); return i end)
    local ok, i = task.wait(waiter)
    expect.eq(ok, true); expect.truthy(i == 1 or i == 2); expect.eq(woke, 1)
    local c = task.spawn(function() task.sleep(0.03) return "c" end)
    local w2 = task.spawn(function() return task.any({ c }) end)
    task.sleep(0.01)
    expect.eq(task.kill(w2), true)
    expect.eq(next(c.watchers or {}), nil, "the killed waiter left no watcher on the task")
    expect.eq(task.wait(c), true, "the watched task finishes although its watcher was killed")
  end)

  it("kill cancels a sleeping task and its waiters see ECANCELED", function()
    local t = task.spawn(function() task.sleep(10) return "late" end)
    task.sleep(0.01)
    expect.eq(task.kill(t), true)
    local ok, err = task.wait(t)
    expect.eq(ok, false); expect.match(err, "ECANCELED")
    expect.eq(task.kill(t), false)
  end)

  it("semaphore limits holders and times out", function()
    local sem = task.semaphore(1)
    expect.truthy(sem:acquire())
    local ok, err, code = sem:acquire(0.05)
    expect.eq(ok, nil); expect.eq(code, "ETIMEDOUT"); expect.match(err, "ETIMEDOUT")
    local got
    local t = task.spawn(function() got = sem:acquire(1) end)
    task.sleep(0.01)
    sem:release()
    task.wait(t)
    expect.eq(got, true)
    expect.eq(sem:available(), 0)
  end)

  it("condition wakes every task waiting, in the order they came, and only those", function()
    local cond = task.condition()
    expect.eq(cond:notify_all(), 0, "nobody waits yet")
    local order = {}
    local function waiter(name)
      return task.spawn(function() local r = cond:wait(); order[#order + 1] = name; return r end)
    end
    local a, b, c = waiter("a"), waiter("b"), waiter("c")
    task.sleep(0.01)
    expect.eq(task.kill(b), true)
    expect.same(order, {}, "no task runs before notify_all")
    expect.eq(cond:notify_all(), 2, "the killed waiter is passed over")
    expect.same({ task.wait(a) }, { true, true }, "wait() returns true")
    task.wait(c)
    expect.same(order, { "a", "c" })
    local late = waiter("late")
    task.sleep(0.01)
    expect.same(order, { "a", "c" }, "an earlier notify_all does not wake a later wait")
    expect.eq(cond:notify_all(), 1)
    task.wait(late)
    expect.same(order, { "a", "c", "late" })
  end)

  it("raises when a waiting primitive runs outside a task", function()
    local co = coroutine.wrap(function() return pcall(task.sleep, 0.01) end)
    local ok, err = co()
    expect.eq(ok, false)
    expect.match(err, "must be called inside a task")
  end)

  it("yield lets the other ready tasks run and then continues", function()
    local order = {}
    local r = task.all({
      function() order[#order + 1] = "a1"; task.yield(); order[#order + 1] = "a2"; return 1 end,
      function() order[#order + 1] = "b"; return 2 end,
    })
    expect.eq(r[1][1], 1); expect.eq(r[2][1], 2)
    expect.same(order, { "a1", "b", "a2" })
  end)

  it("names tasks", function()
    local name
    task.wait(task.spawn({ fn = function() name = task.name() end, name = "worker-7" }))
    expect.eq(name, "worker-7")
  end)
end)
