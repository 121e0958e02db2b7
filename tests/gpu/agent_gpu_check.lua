-- Driver of tests/gpu/agent_gpu_check.sh (GPU only). Prints PASS/FAIL lines and figures;
-- returns 1 on any failure.
package.path = kagent.root .. "/?.lua;" .. kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs, json, proc = kagent.fs, kagent.json, kagent.proc
local fake = require("fake_session")
local out = kagent.args[1] or "/tmp/kagent-agent-gpu-check"
local root = kagent.root
local failures = 0
-- KAGENT_AGENT_CHECK_STEPS picks steps (default "beam,tune,generate,skill,trust,stale,resume")
local steps = os.getenv("KAGENT_AGENT_CHECK_STEPS") or "beam,tune,generate,skill,trust,stale,resume"
local function want(step) return ("," .. steps .. ","):find("," .. step .. ",", 1, true) ~= nil end
local function check(cond, what)
  print((cond and "PASS " or "FAIL ") .. what)
  if not cond then failures = failures + 1 end
end

-- agent(script, entry, step, argv) -> run folder, summary: agents/<entry> on #36 bf16 with the
-- FAKE LLM server answering from `script`, its own output folder and memory under `out`
local function agent(script, entry, step, argv)
  local a = { "--problem", "examples/problems/36_rmsnorm.py", "--dtype", "bf16" }
  for _, x in ipairs(argv) do a[#a + 1] = x end
  local r, rd, s = fake.scripted_run(script, entry, a, out .. "/" .. step, 1500)
  io.write(r.stderr:sub(-4000))
  check(r.code == 0, entry .. " exit code " .. tostring(r.code))
  check(s ~= nil, step .. ": summary.json written")
  return rd, s
end

local onepass = root .. "/tests/fixtures/agent/triton/rmsnorm_onepass.py"
local twopass = root .. "/tests/fixtures/agent/triton/rmsnorm_twopass.py"

-- 1. beam search with the fake LLM replaying the one-pass kernel
if want("beam") then
local rd, s = agent(fake.script({ n = 2, kernels = { onepass, twopass } }), "beam.lua", "beam",
  { "--kernel", twopass, "--rounds", "1" })
if s then
  check(s.best.id == "r1w1", "the replayed one-pass kernel is best (best = " .. tostring(s.best.id) .. ")")
  check((fs.read(rd .. "/best_kernel.py") or ""):gsub("%s+$", "") == fs.read(onepass):gsub("%s+$", ""), "best_kernel.py is the one-pass kernel")
  check(s.verified == true, "best kernel verified")
  check(type(s.baselines.eager_ms) == "number" and type(s.baselines.compile_ms) == "number", "timed against eager and torch.compile")
  check((s.outcomes.duplicate or 0) == 1, "the parent's copy was rejected as a duplicate")
  print(string.format("FIGURE beam #36 bf16: input %.4f ms -> best %.4f ms (%.2fx); eager %.4f ms, torch.compile %.4f ms; %.2fx vs compile; SOL %s%%",
    s.input_ms, s.best_ms, s.speedup_vs_input, s.baselines.eager_ms or 0, s.baselines.compile_ms or 0,
    type(s.speedup_vs_compile) == "number" and s.speedup_vs_compile or 0, tostring(s.sol_pct)))
  for w = 1, 2 do
    for _, f in ipairs({ "input_ncu_metrics.json", "bottleneck_prompt.txt", "bottleneck_response.txt", "strategy.json",
      "opt_prompt.txt", "opt_reply.txt", "reflexion.txt", "optimized_ncu_metrics.json", "kernel.py", "benchmark_results.json" }) do
      check(fs.exists(string.format("%s/rounds/round_1/w%d/%s", rd, w, f)), string.format("round_1/w%d/%s", w, f))
    end
  end
  local m = json.decode(fs.read(rd .. "/rounds/round_1/w1/optimized_ncu_metrics.json"))
  check(next(m.metrics) ~= nil, "hardware counters recorded for the child")
  local page = fs.read(rd .. "/report.html") or ""
  check(page:find('data-spec="spec-roofline"', 1, true) ~= nil, "report.html shows the roofline position")
  print("REPORT " .. rd .. "/report.html")
end

end

-- 2. the LLM-free tuner on the example kernel
if want("tune") then
local tune_out = out .. "/tune"
local cmd = { os.getenv("KAGENT_BIN") or "build/kagent-rt", "--env-file", "/dev/null", root .. "/agents/tune.lua",
  "--problem", "examples/problems/36_rmsnorm.py", "--kernel", "examples/kernels/36_rmsnorm.py", "--dtype", "bf16",
  "--rounds", "3", "--tune-candidates", "4", "--out", tune_out }
local t = assert(proc.run(cmd, { cwd = root, env = { KAGENT_DB = out .. "/mem.db", KAGENT_PROGRESS = "lines" }, timeout = 1500 }))
io.write(t.stderr:sub(-3000))
check(t.code == 0, "tune.lua exit code " .. tostring(t.code))
local td = fake.newest_run(tune_out)
local ts = td and json.decode(fs.read(td .. "/summary.json") or "null")
check(type(ts) == "table", "tuner summary.json written")
if type(ts) == "table" then
  print(string.format("FIGURE tune #36 bf16: input %.4f ms -> best %.4f ms (%.3fx) after %d round(s): %s; eager %.4f ms, compile %.4f ms",
    ts.input_ms, ts.best_ms, ts.speedup_vs_input, ts.rounds, ts.stop_reason, ts.baselines.eager_ms or 0, ts.baselines.compile_ms or 0))
  check(ts.speedup_vs_input >= 1.0, "tuner never returns a slower kernel")
end
end

-- 3. generation with no kernel: the fake LLM answers every generator with the one-pass kernel;
-- the winner must verify on the GPU and be timed against both baselines
if want("generate") then
  local code = assert(fs.read(onepass))
  local _, gsum = agent({ latency = 0, replies = {
    { match = "# GENERATE KERNEL", text = "One program per block of positions.\n```python\n" .. code .. "```\n" } } },
    "generate.lua", "generate", { "--gen-workers", "2" })
  check(type(gsum) == "table" and gsum.verified == true, "the generated kernel verified on the GPU")
  if type(gsum) == "table" then
    check(type(gsum.baselines.eager_ms) == "number" and type(gsum.baselines.compile_ms) == "number",
      "generated kernel timed against eager and torch.compile")
    check(type(gsum.sol_pct) == "number", "and placed against its roofline")
    print(string.format("FIGURE generate #36 bf16: worker %d after %d attempt(s): %.4f ms, %.2fx eager, %.2fx compile, SOL %.0f%%, %.1f s wall",
      gsum.worker, gsum.attempts, gsum.best_ms, gsum.speedup_vs_eager, gsum.speedup_vs_compile, gsum.sol_pct, gsum.wall_s))
  end
end

-- 4. the skill policy: retrieval on real counters, plans with evidence (the fake planner offers
-- one plan per common skill; those the retrieval allows are taken, the rest rejected), every
-- rewrite the one-pass kernel
if want("skill") then
  local code = assert(fs.read(onepass))
  local plans = {}
  for _, sk in ipairs({ "fusion", "vectorization", "memory_parallelism", "ilp", "coalescing", "alignment_tails",
      "smem_tiling", "live_ranges", "reduce_instructions", "launch_tuning" }) do
    plans[#plans + 1] = { skill = sk, evidence = { { metric = "dram__throughput.avg.pct_of_peak_sustained_elapsed", value = 80,
      why = "DRAM bound" }, { metric = "time_ms", value = 4, why = "measured" } },
      plan = "PLAN_ONE: read x once, keeping all channels of a block of positions in registers",
      change = "one pass over x with " .. sk, params = { passes = 1, skill = sk } }
  end
  local rd, s = agent({ latency = 0, replies = {
    { match = "# PLAN", text = fake.fenced({ plans = plans }) },
    { match = "# REFLEXION", text = fake.fenced({ was_fix_effective = true, lessons = { "one pass reads x once" } }) },
    { match = "# OPTIMIZE KERNEL", text = "One pass over x.\n```python\n" .. code .. "```\n" } } }, "skill.lua", "skill",
    { "--kernel", twopass, "--rounds", "1", "--directions", "2" })
  if s then
    local info = json.decode(fs.read(rd .. "/rounds/round_1/directions_input.json") or "null")
    local d = info and info.info and info.info.retrieval
    check(type(d) == "table" and d.bucket ~= "unprofiled", "retrieval on hardware counters (bucket " .. tostring(d and d.bucket) .. ")")
    check(type(d) == "table" and #d.evidence >= 1, "the bucket's evidence is traced")
    local strat = json.decode(fs.read(rd .. "/rounds/round_1/w1/strategy.json") or "null")
    check(type(strat) == "table" and strat[1].evidence ~= nil, "the plan's metric evidence is traced")
    check(s.best.id == "r1w1" or s.best.id == "r1w2", "the one-pass kernel is best (best = " .. tostring(s.best.id) .. ")")
    check(s.verified == true, "best kernel confirmed")
    check(type(s.baselines.eager_ms) == "number" and type(s.baselines.compile_ms) == "number", "timed against eager and torch.compile")
    print(string.format("FIGURE skill #36 bf16: bucket %s tier %s (%s); input %.4f ms -> best %.4f ms (%.2fx); %.2fx vs compile; SOL %s%%",
      tostring(d and d.bucket), tostring(d and d.tier), d and d.why or "", s.input_ms, s.best_ms, s.speedup_vs_input,
      type(s.speedup_vs_compile) == "number" and s.speedup_vs_compile or 0,
      type(s.sol_pct) == "number" and string.format("%.0f", s.sol_pct) or "-"))
  end
end
-- softmax_beam(tag, port, db[, directions]) -> run folder, summary: agents/beam.lua on the trust
-- checks' softmax (fp32) from the slow example kernel, one round, the FAKE LLM on port answering
local function softmax_beam(tag, port, db, directions)
  local T = root .. "/tests/fixtures/trust/"
  local r = fake.run_agent("beam.lua", { "--problem", T .. "softmax_problem.py", "--kernel", root .. "/examples/kernels/softmax.py",
    "--dtype", "fp32", "--rounds", "1", "--beam", "1", "--directions", tostring(directions or 4), "--refine", "0",
    "--out", out .. "/" .. tag }, fake.env(port, { KAGENT_DB = db }), 1500)
  io.write(r.stderr:sub(-4000))
  check(r.code == 0, tag .. ": beam.lua exit code " .. tostring(r.code))
  local rd = fake.newest_run(out .. "/" .. tag)
  local s = rd and json.decode(fs.read(rd .. "/summary.json") or "null")
  check(type(s) == "table", tag .. ": summary.json written")
  return rd, s
end

-- 5. trust: softmax 4096 x 4096 (fp32) from a slow three-pass kernel; the FAKE LLM answers one
-- direction with an honest one-pass kernel and the others with the same kernel launched on an
-- unjoined side stream, with one short side-stream launch, and from a background thread. The
-- honest kernel must end as best; each cheat is rejected at stage "timing" with a reason that
-- names the cause, and no figure of theirs reaches the traces, summary.json or memory.
if want("trust") then
  local T = root .. "/tests/fixtures/trust/"
  local kernels = { T .. "softmax_onepass.py", T .. "softmax_side_stream.py", T .. "softmax_side_stream_short.py",
    T .. "softmax_thread.py" }
  local server, port = fake.start(fake.script({ n = 4, kernels = kernels }), out)
  local db = out .. "/trust.db"
  local rd, s = softmax_beam("trust", port, db)
  server:kill()
  if type(s) == "table" then
    check((fs.read(rd .. "/best_kernel.py") or ""):gsub("%s+$", "") == fs.read(kernels[1]):gsub("%s+$", ""),
      "trust: the honest one-pass kernel is best (best = " .. tostring(s.best.id) .. ")")
    check(s.verified == true, "trust: the best kernel is confirmed")
    for _, k in ipairs({ "eager_ms", "compile_ms", "compile_max_autotune_ms" }) do
      check(type(s.baselines[k]) == "number", "trust: summary has " .. k)
    end
    for w = 2, 4 do
      local b = json.decode(fs.read(string.format("%s/rounds/round_1/w%d/benchmark_results.json", rd, w)) or "null")
      local _, row = next(b and b.kernels or {})
      row = row or {}
      check(row.ok == false and row.stage == "timing" and tostring(row.error):find("outside the timed events", 1, true) ~= nil
        and (row.time_ms == nil or row.time_ms == json.null),
        string.format("trust: w%d (%s) rejected at stage timing, no time: %s", w, kernels[w]:match("[^/]+$"), tostring(row.error)))
    end
    -- the side-stream copies measured about 0.0013 ms before the evaluator refused them
    check(s.best_ms >= 0.03 and (type(s.sol_pct) ~= "number" or s.sol_pct <= 100),
      "trust: the summary's figures are the honest kernel's (" .. tostring(s.best_ms) .. " ms)")
    local m = assert(kagent.mem.open(db))
    local rows = m:query("SELECT stage, time_ms FROM attempts WHERE stage = 'timing'")
    local leaked = 0
    for _, row in ipairs(rows) do if row.time_ms ~= nil and row.time_ms ~= json.null then leaked = leaked + 1 end end
    check(#rows >= 3 and leaked == 0, string.format("trust: %d rejected attempts in memory, %d with a time", #rows, leaked))
    m:close()
    print(string.format("FIGURE trust softmax 4096x4096 fp32: input %.4f ms -> best %.4f ms (%.2fx); eager %.4f, compile %.4f, max-autotune %s ms; SOL %s%%; generalizes %s; sanitizer %s",
      s.input_ms, s.best_ms, s.speedup_vs_input, s.baselines.eager_ms or 0, s.baselines.compile_ms or 0,
      tostring(s.baselines.compile_max_autotune_ms), tostring(s.sol_pct), tostring(s.generalizes), tostring(s.sanitizer)))
  end
end

-- 5b. stale: the same problem, the FAKE LLM answering one direction with a copy of the honest
-- kernel that returns its previous output on one timed call in sixteen (a tie with the honest
-- one on every median) and the other with the honest kernel. The stale copy is refused (ESTALE,
-- stage timing, no time) and the honest kernel ends as best.
if want("stale") then
  local T = root .. "/tests/fixtures/trust/"
  local kernels = { T .. "softmax_stale_one_in_16.py", T .. "softmax_onepass.py" }
  local server, port = fake.start(fake.script({ n = 2, kernels = kernels }), out)
  local rd, s = softmax_beam("stale", port, out .. "/stale.db", #kernels)
  server:kill()
  if type(s) == "table" then
    check((fs.read(rd .. "/best_kernel.py") or ""):gsub("%s+$", "") == fs.read(kernels[2]):gsub("%s+$", ""),
      "stale: the honest kernel is best (best = " .. tostring(s.best and s.best.id) .. ")")
    local b = json.decode(fs.read(rd .. "/rounds/round_1/w1/benchmark_results.json") or "null")
    local _, row = next(type(b) == "table" and b.kernels or {})
    row = row or {}
    check(row.ok == false and row.stage == "timing" and tostring(row.error):find("^ESTALE") ~= nil
      and (row.time_ms == nil or row.time_ms == json.null),
      "stale: the stale copy is refused at stage timing with ESTALE, no time: " .. tostring(row.error))
    print(string.format("FIGURE stale softmax 4096x4096 fp32: best %s %.4f ms; stale copy: %s",
      tostring(s.best and s.best.id), s.best_ms or 0, tostring(row.error):sub(1, 160)))
  end
end

-- 6. --resume after kill -9 in GPU mode: beam.lua on #36 for two rounds of two directions, killed
-- while round 2's second direction waits on a slow reply; --resume redoes round 2 with the run's
-- own options, and the database counts the attempts summary.json counts
if want("resume") then
  local fake_llm = dofile(root .. "/tests/fixtures/fake_llm/fake.lua")
  local function script(slow)
    local sc = fake.script({ n = 2, kernels = { onepass, twopass } })
    if slow then  -- the second direction answers once, then stalls
      local d2 = sc.replies[#sc.replies]
      table.insert(sc.replies, #sc.replies, { match = d2.match, text = d2.text, times = 1 })
      d2.delay = 300
    end
    return sc
  end
  local dir = out .. "/resume"
  fs.mkdir_p(dir)
  local srv = fake_llm.start({ script = script(true) })
  local env = fake.env(srv.port, { KAGENT_DB = dir .. "/mem.db" })
  local p = fake.spawn_agent("beam.lua", { "--problem", "examples/problems/36_rmsnorm.py", "--dtype", "bf16",
    "--kernel", twopass, "--out", dir .. "/runs", "--rounds", "2", "--beam", "1", "--directions", "2",
    "--refine", "0", "--plateau", "5" }, env)
  local t0, seen = kagent.time.now(), 0
  while kagent.time.now() - t0 < 600 and p:running() and seen == 0 do
    local db = kagent.mem.open(dir .. "/mem.db")
    if db then
      seen = db:query("SELECT count(*) AS n FROM attempts WHERE round = 2")[1].n
      db:close()
    end
    kagent.task.sleep(0.5)
  end
  check(p:running() and seen == 1, "resume: killed with round 2's first attempt recorded (" .. seen .. " recorded)")
  p:kill("KILL")
  local killed = p:wait(30)
  if killed and killed.stderr then io.write(killed.stderr:sub(-1500)) end
  local rd = fake.newest_run(dir .. "/runs")
  local state = rd and json.decode(fs.read(rd .. "/state.json") or "null")
  check(type(state) == "table" and state.round == 1, "resume: state.json holds round 1, the last whole round")
  srv:set_script(script(false))
  local r = fake.run_agent("beam.lua", { "--resume", rd }, env, 1200)
  srv:stop()
  io.write(r.stderr:sub(-3000))
  check(r.code == 0, "resume: --resume exit code " .. tostring(r.code))
  local s = json.decode(fs.read(rd .. "/summary.json") or "null")
  if type(s) == "table" then
    check(s.rounds == 2 and s.rounds_requested == 2 and s.status == "done",
      string.format("resume: two rounds with the run's own --rounds (rounds %s of %s, %s)", tostring(s.rounds),
        tostring(s.rounds_requested), tostring(s.status)))
    local db = assert(kagent.mem.open(dir .. "/mem.db"))
    local run_id = db:query("SELECT id FROM runs")[1].id
    local function n(sql) return db:query(sql, { run_id })[1].n end
    local kept = n("SELECT count(*) AS n FROM attempts WHERE run_id = ? AND role NOT IN ('input', 'repair') AND stage != 'superseded'")
    local superseded = n("SELECT count(*) AS n FROM attempts WHERE run_id = ? AND stage = 'superseded'")
    db:close()
    check(kept == s.attempts and s.attempts == 4 and superseded == 1, string.format(
      "resume: database %d attempts kept, %d superseded; summary.json %s attempts", kept, superseded, tostring(s.attempts)))
    check(s.verified == true, "resume: best kernel verified (" .. tostring(s.best and s.best.id) .. ", " .. tostring(s.best_ms) .. " ms)")
  else
    check(false, "resume: summary.json written")
  end
end

print(failures == 0 and "agent GPU check: all passed" or ("agent GPU check: " .. failures .. " failure(s)"))
return failures == 0 and 0 or 1
