-- Memory benchmark: 64 concurrent tasks record 10,000 attempts (one commit each) into a fresh
-- database file, then the queries a search policy makes: history windows, duplicate checks by
-- fingerprint and by (parent, skill, plan). Prints the figures; the done-when bar is 2 s total.
--   kagent-rt bench/mem_bench.lua [db_path] [attempts] [tasks]
local mem, task, time, fs = kagent.mem, kagent.task, kagent.time, kagent.fs

local path = kagent.args[1] or string.format("/tmp/kagent-mem-bench-%d.db", os.time())
local N = tonumber(kagent.args[2]) or 10000
local TASKS = tonumber(kagent.args[3]) or 64
for _, suffix in ipairs({ "", "-wal", "-shm" }) do fs.remove(path .. suffix) end

local SKILLS = { "coalesce", "vectorize", "tiling", "register_blocking", "fusion", "launch_tuning" }
local t_start = time.now()
local db = assert(mem.open(path))
local run = assert(db:start_run{ problem = "bench.py", problem_hash = "bench", gpu = "H100",
  policy = "bench", config = { tasks = TASKS } })
local t_open = time.now()

-- Every attempt after the first few takes an earlier attempt as parent, like a beam search; a
-- fingerprint space smaller than N makes duplicates happen.
local ids, plan_of = {}, {}
local per_task = math.ceil(N / TASKS)
local recorded = 0
local function worker(w)
  for i = 1, per_task do
    if recorded >= N then return end
    recorded = recorded + 1
    local parent = #ids > 0 and ids[math.random(#ids)] or nil
    local k = recorded
    local id = assert(db:add_attempt{
      run_id = run, round = 1 + k % 10, parent_id = parent, worker = "w" .. w, role = "optimizer",
      skill = SKILLS[1 + k % #SKILLS], plan_signature = "plan" .. (k % 97),
      source_hash = "src" .. k, fingerprint = "fp" .. (k % 7919), stage = "done",
      correct = k % 3 ~= 0, time_ms = 1 + (k % 1000) / 100, speedup_vs_eager = 1.1,
      metrics = { dram_pct = k % 100, sm_pct = (k * 7) % 100, occupancy = 0.5 },
    })
    ids[#ids + 1] = id
    plan_of[id] = { parent_id = parent, skill = SKILLS[1 + k % #SKILLS], plan_signature = "plan" .. (k % 97) }
    if k % 4 == 0 then
      db:add_reflexion{ attempt_id = id, diagnosis_correct = true, fix_effective = k % 8 == 0,
        lessons = { "lesson " .. k }, avoid = { "bank conflicts" }, try = { "float4" } }
    end
    task.sleep(0) -- let the other tasks interleave, as real workers would
  end
end
local list = {}
for w = 1, TASKS do list[w] = function() worker(w) end end
for _, r in ipairs(task.all(list)) do assert(r.ok, r[1]) end
local t_write = time.now()

local Q = 1000
local dup_hits, tried_hits = 0, 0
for i = 1, Q do
  local parent = ids[math.random(#ids)]
  local h = db:history(run, { parent_id = parent, limit = 10 })
  assert(type(h) == "table")
  if db:find_fingerprint(run, "fp" .. math.random(0, 9000)) then dup_hits = dup_hits + 1 end
  -- Half the plan checks repeat a recorded plan (must hit), half propose a new one.
  local plan = plan_of[ids[math.random(#ids)]]
  if i % 2 == 1 then plan = { parent_id = parent, skill = "fusion", plan_signature = "new" .. i } end
  if db:was_tried(plan) then
    tried_hits = tried_hits + 1
  end
end
local window = db:history(run, { limit = 20 })
local best = db:best_attempt(run)
local t_query = time.now()

local count = db:query("SELECT count(*) AS n FROM attempts WHERE run_id = ?", { run })[1].n
db:close()
local t_end = time.now()
assert(count == N, "recorded " .. tostring(count))

print(string.format("mem_bench: %d attempts from %d tasks into %s", N, TASKS, path))
print(string.format("  open+migrate      %8.3f s", t_open - t_start))
print(string.format("  record            %8.3f s  (%.1f us/attempt, %d reflexions)", t_write - t_open,
  (t_write - t_open) / N * 1e6, math.floor(N / 4)))
print(string.format("  queries           %8.3f s  (%d x {history(parent, 10), find_fingerprint, was_tried}; %d duplicate, %d tried)",
  t_query - t_write, Q, dup_hits, tried_hits))
assert(tried_hits == Q / 2, "was_tried hits " .. tried_hits)
print(string.format("  history window    %d entries, best attempt #%d (%.2f ms)", #window, best.id, best.time_ms))
print(string.format("  total             %8.3f s  (bar: 2 s)", t_end - t_start))
for _, suffix in ipairs({ "", "-wal", "-shm" }) do fs.remove(path .. suffix) end
return (t_end - t_start) < 2.0 and 0 or 1
