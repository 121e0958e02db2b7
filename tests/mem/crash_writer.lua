-- Writer for the SIGKILL durability test (tests/lua/mem_crash_spec.lua): 8 tasks record attempts
-- (with reflexions and lessons mixed in) as fast as they can, and print each attempt id, flushed,
-- only after db:add_attempt has returned. Whatever was printed must survive a kill -9.
--   kagent-rt tests/mem/crash_writer.lua DB_PATH
local mem, task = kagent.mem, kagent.task
local db = assert(mem.open(assert(kagent.args[1], "usage: crash_writer.lua DB_PATH")))
local run = assert(db:start_run{ problem = "crash.py", problem_hash = "crash", gpu = "cpu", policy = "crash" })
local out = io.stdout
local n = 0

local function writer(w)
  local parent
  while true do
    n = n + 1
    local id = assert(db:add_attempt{ run_id = run, parent_id = parent, worker = "w" .. w,
      skill = "s" .. (n % 5), fingerprint = "fp" .. n, stage = "done", correct = true,
      time_ms = n, metrics = { n = n, pad = string.rep("x", 200) } })
    out:write(id, "\n")
    out:flush()
    if n % 3 == 0 then assert(db:add_reflexion{ attempt_id = id, text = "r" .. n, lessons = { "l" } }) end
    if n % 7 == 0 then assert(db:add_lesson{ text = "lesson about fp" .. n, tags = { "crash" } }) end
    parent = id
    if n % 4 == 0 then task.sleep(0) end
  end
end

local list = {}
for w = 1, 8 do list[w] = function() writer(w) end end
task.all(list)
