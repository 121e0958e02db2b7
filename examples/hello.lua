-- kagent-rt examples/hello.lua [name]
-- Three tasks sleep at once, a child process runs, and the results come back as JSON.
local task, proc, json, log = kagent.task, kagent.proc, kagent.json, kagent.log

local name = kagent.args[1] or "world"
log.info("hello, %s (kagent-rt %s)", name, kagent.version)

local t0 = kagent.time.now()
local results = task.all({
  function() task.sleep(0.3) return "slept 0.3 s" end,
  function() task.sleep(0.3) return "slept 0.3 s too" end,
  function() return proc.run({ "uname", "-sm" }).stdout:gsub("\n", "") end,
})
print(json.encode({ results = { results[1][1], results[2][1], results[3][1] },
  wall_s = math.floor((kagent.time.now() - t0) * 100) / 100 }))
