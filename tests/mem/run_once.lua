-- One "run" of an agent on a problem, for the cross-run memory test (tests/lua/mem_runs_spec.lua):
-- it first reads what earlier runs left (best archived kernel, lessons), prints that as one JSON
-- line, then records its own run, a lesson and a faster archived kernel.
--   kagent-rt tests/mem/run_once.lua DB_PATH RUN_LABEL TIME_MS
local mem, json = kagent.mem, kagent.json
local path, label, time_ms = kagent.args[1], kagent.args[2], tonumber(kagent.args[3])
local db = assert(mem.open(path))
local problem_hash, gpu = "sha256:rmsnorm-36", "H100"

local best = db:best_archived{ problem_hash = problem_hash, gpu = gpu }
local lessons = db:search_lessons("rmsnorm reduction: vectorized loads?", { problem_hash = problem_hash })
local seen = { best_source = best and best.source, best_time_ms = best and best.time_ms, lessons = {} }
for _, l in ipairs(lessons) do seen.lessons[#seen.lessons + 1] = l.text end
print(json.encode(seen))

local run = assert(db:start_run{ problem = "36_rmsnorm.py", problem_hash = problem_hash, gpu = gpu,
  policy = "beam", config = { label = label } })
local source = "# kernel from " .. label
local a = assert(db:add_attempt{ run_id = run, round = 1, skill = "vectorize", source_hash = label,
  fingerprint = "fp-" .. label, stage = "done", correct = true, time_ms = time_ms })
assert(db:add_reflexion{ attempt_id = a, diagnosis_correct = true, fix_effective = true,
  lessons = { "vectorized loads helped rmsnorm (" .. label .. ")" } })
assert(db:add_lesson{ text = "In " .. label .. ": vectorized float4 loads helped the rmsnorm reduction",
  tags = { "memory", "reduction" }, problem_hash = problem_hash, gpu = gpu, source_attempt = a })
assert(db:archive_kernel{ problem_hash = problem_hash, gpu = gpu, source = source, time_ms = time_ms,
  run_id = run, attempt_id = a, metrics = { dram_pct = 80 } })
assert(db:finish_run(run, "done", { best = a }))
db:close()
