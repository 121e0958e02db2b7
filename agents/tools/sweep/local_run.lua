-- Running a sweep on this machine: problems run at once up to a cap, each in its own child
-- kagent-rt with its own GPUs (a slot), so no two runs time kernels on the same GPU unless the
-- cap asks for more runs than there are GPUs.
local gpu = require("kagent.gpu")
local task = require("kagent.task")
local task_lib = require("agents.tools.sweep.task")

local M = {}

-- slots(devices, max_concurrent) -> array of {devices = "0,2" | "cpu", gpus = n}, and a warning
-- when runs must share GPUs. devices: "cpu", "0,1,..." or "all"/nil (every GPU this process may
-- use, kagent.gpu.gpus(), else CPU mode). GPU numbers are positions in that list, as in --devices.
function M.slots(devices, cap)
  local gpus = {}
  if devices ~= "cpu" then
    if devices and devices ~= "all" then
      for d in devices:gmatch("%d+") do gpus[#gpus + 1] = d end
    else
      for i = 0, #gpu.gpus() - 1 do gpus[#gpus + 1] = tostring(i) end
    end
  end
  local out = {}
  if #gpus == 0 then
    for i = 1, cap or 1 do out[i] = { devices = "cpu", gpus = 0 } end
    return out
  end
  cap = cap or #gpus
  if cap <= #gpus then
    -- the GPUs dealt out in turn: each run gets #gpus / cap of them
    for i = 1, cap do out[i] = { list = {} } end
    for i, g in ipairs(gpus) do table.insert(out[(i - 1) % cap + 1].list, g) end
    for _, s in ipairs(out) do s.devices, s.gpus, s.list = table.concat(s.list, ","), #s.list, nil end
    return out
  end
  for i = 1, cap do out[i] = { devices = gpus[(i - 1) % #gpus + 1], gpus = 1 } end
  return out, string.format("%d runs at once on %d GPU(s): runs share GPUs, and their timed stages wait for each other's (the GPU's host lease)", cap, #gpus)
end

-- run_env(n) -> the environment each of n runs at once gets: TorchInductor's compile workers
-- (one per core by default, in every run) shared out, so that n runs compiling at once do not
-- oversubscribe the host's CPUs, under which each timed call's launch waits its turn and the
-- worker's clock can no longer check a figure (docs/lua-api.md, `clock_unchecked`). A value the
-- user set is kept.
function M.run_env(n)
  if os.getenv("TORCHINDUCTOR_COMPILE_THREADS") or n <= 1 then return {} end
  local cores = gpu.auto_workers_per_gpu({ gpus = 1 }).cores
  return { TORCHINDUCTOR_COMPILE_THREADS = tostring(math.max(1, math.floor(cores / n))) }
end

-- run(plan, todo, o) -> records by problem name. todo: problem entries; o: db, slots, running
-- (a table kept as {problem entry = true} while its run is under way, for the status line),
-- time_limit (seconds a run may take, or nil) and on_done (fn(p, record), after each problem).
function M.run(plan, todo, o)
  local running = o.running or {}
  local free = {}
  for i = #o.slots, 1, -1 do free[#free + 1] = o.slots[i] end
  local records = {}
  local fns = {}
  local env = M.run_env(#o.slots)
  for i, p in ipairs(todo) do
    fns[i] = function()
      local slot = table.remove(free)
      running[p] = true
      local rec = task_lib.run(plan, p, { db = o.db, devices = slot.devices, gpus = slot.gpus, env = env,
        time_limit = o.time_limit })
      running[p] = nil
      free[#free + 1] = slot
      records[p.name] = rec
      -- the table is rewritten as each result arrives, so a sweep cut at any moment has one
      if o.on_done then o.on_done(p, rec) end
      return rec
    end
  end
  task.all(fns, { limit = #o.slots })
  return records
end

return M
