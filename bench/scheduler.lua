-- kagent-rt bench/scheduler.lua [n_tasks] [n_children]
-- Prints: spawn+resume cost per task, wall time of many sleeping tasks, and of many children
-- in flight at once. Figures, not pass/fail.
local task, time, proc = kagent.task, kagent.time, kagent.proc
local n = tonumber(kagent.args[1]) or 100000
local n_children = tonumber(kagent.args[2]) or 50

local function bench_spawn()
  local t0 = time.now()
  local list = {}
  for i = 1, n do list[i] = task.spawn(function() return i end) end
  for i = 1, n do task.wait(list[i]) end
  return (time.now() - t0) / n
end

local function bench_sleepers(count, s)
  local t0 = time.now()
  local list = {}
  for i = 1, count do list[i] = task.spawn(function() task.sleep(s) end) end
  for i = 1, count do task.wait(list[i]) end
  return time.now() - t0
end

local function bench_children(count, s)
  local t0 = time.now()
  local fns = {}
  for i = 1, count do fns[i] = function() return proc.run({ "sleep", tostring(s) }) end end
  task.all(fns)
  return time.now() - t0
end

local per_task = bench_spawn()
print(string.format("spawn+resume+finish+wait per task: %.2f us (%d tasks)", per_task * 1e6, n))
print(string.format("10000 tasks sleeping 0.5 s: %.3f s wall", bench_sleepers(10000, 0.5)))
print(string.format("1000 tasks sleeping 0.5 s: %.3f s wall", bench_sleepers(1000, 0.5)))
print(string.format("%d children 'sleep 0.5' at once: %.3f s wall", n_children, bench_children(n_children, 0.5)))
