-- End to end on the CPU: agents/skill.lua against the FAKE LLM server
-- (tests/fixtures/fake_llm/server.py), speaking the Anthropic format so prompt caching shows.
-- Run 1: the planner's first plan (vectorization) yields a broken kernel that the auditor
-- diagnoses and the patch fixes into a fast one; the second plan (fusion) a slow one. Run 2 on the
-- same kernel and memory: the planner repeats both plans, memory refuses them, the planner is asked
-- again, the gap is filled by rule, and vectorization (ranked last in run 1) ranks first.
-- Candidates are pure PyTorch (CPU mode); needs a python with torch (KAGENT_PYTHON).
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs, json, proc, mem = kagent.fs, kagent.json, kagent.proc, kagent.mem
local fake = require("fake_session")
local cpu = fake.cpu()
local root, fx, problem = kagent.root, cpu.fx, cpu.problem


local fenced = fake.fenced

local PLANS = { plans = {
  { skill = "vectorization", evidence = { { metric = "time_ms", value = 2.0, why = "a Python loop per channel" } },
    plan = "PLAN_ALPHA: one vectorised pass over all channels", change = "replace the channel loop by one mean over dim 1",
    params = { passes = 1 } },
  { skill = "fusion", evidence = { { metric = "time_ms", value = 2.0, why = "two passes" } },
    plan = "PLAN_BETA: fuse the statistics into the scaling loop", change = "keep the loop, fuse the two statements",
    params = { chunk = 64 } } } }

local REFLEXION = fenced({ was_diagnosis_correct = true, was_fix_effective = true, expected_outcome = "faster",
  actual_outcome = "measured", reasoning = "scripted", lessons = { "one vectorised pass beats a per-channel loop" },
  avoid_patterns = {}, try_patterns = {} })

local function script()
  return { latency = 0, replies = {
    { match = "# PLAN", text = fenced(PLANS) },
    { match = "# AUDIT FAILURE", text = fenced({ cause = "AUDIT_CAUSE: the scale misses the square root",
      evidence = "EMISMATCH at element 0", fix = "multiply by rsqrt(mean(x*x) + eps)" }) },
    { match = "# REPAIR KERNEL", text = cpu.code_block("fast.py") },
    { match = "# REFLEXION", text = REFLEXION },
    { match = "PLAN_ALPHA", text = cpu.code_block("broken.py"), times = 1 },
    { match = "PLAN_ALPHA", text = cpu.code_block("fast.py") },
    { match = "PLAN_BETA", text = cpu.code_block("slow2.py") },
    { match = "# OPTIMIZE KERNEL", text = cpu.code_block("slow2.py") },
  } }
end

local function env_for(dir, port)
  return { KAGENT_PYTHON = spec.python, KAGENT_DB = dir .. "/mem.db", KAGENT_PROGRESS = "lines",
    ANTHROPIC_BASE_URL = "http://127.0.0.1:" .. port, ANTHROPIC_API_KEY = "fake-key",
    KAGENT_MODEL = "anthropic:claude-sonnet-4-5", KAGENT_LLM_URL = false, OPENAI_API_KEY = false,
    OPENAI_BASE_URL = false, KAGENT_LLM_CACHE = false }
end

local function run_skill(dir, port, out)
  local r = fake.run_agent("skill.lua", { "--problem", problem, "--kernel", fx .. "slow.py", "--rounds", "1",
    "--directions", "2", "--refine", "2", "--devices", "cpu", "--out", dir .. "/" .. out }, env_for(dir, port), 600)
  if r.code ~= 0 then error("skill.lua exited " .. r.code .. "\n" .. r.stderr:sub(-3000)) end
  return fake.newest_run(dir .. "/" .. out)
end

local function read_json(path) return json.decode(assert(fs.read(path), "missing " .. path)) end

local function rank_of(decision, skill)
  for i, r in ipairs(decision.ranked) do if r.skill == skill then return i end end
end

describe("agents/skill.lua on CPU with the fake LLM server", function()
  it("retrieves, plans with evidence, repairs, learns, refuses a repeated plan, and caches prompts", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("skill-e2e")
    local server, port = fake.start(script(), dir)

    -- run 1
    local rd = run_skill(dir, port, "runs1")
    local s = read_json(rd .. "/summary.json")
    expect.eq(s.policy, "skill")
    expect.eq(s.rounds, 1)
    local info = read_json(rd .. "/rounds/round_1/directions_input.json").info
    local d1 = info.retrieval
    expect.eq(d1.bucket, "unprofiled", "CPU mode has no counters")
    expect.eq(d1.structure, "reduction")
    expect.eq(#d1.ranked, #d1.allowed)
    expect.eq(info.planned, 2)
    local w1 = rd .. "/rounds/round_1/w1/"
    expect.eq(read_json(w1 .. "retrieval.json").bucket, "unprofiled", "the retrieval decision in the worker's trace")
    expect.match(fs.read(w1 .. "plan_prompt.txt"), "Allowed skills, ranked by their learned record")
    local strat = read_json(w1 .. "strategy.json")[1]
    expect.eq(strat.skill, "vectorization")
    expect.eq(strat.evidence[1].metric, "time_ms", "the plan's metric evidence")
    expect.eq(strat.signature, "vectorization:passes=1")
    -- the repair round: audit with the failure, then a minimal patch that verifies
    expect.eq(read_json(w1 .. "verify_0.json").ok, false)
    expect.match(fs.read(w1 .. "repair_1_audit_prompt.txt"), "# AUDIT FAILURE")
    expect.match(fs.read(w1 .. "repair_1_prompt.txt"), "AUDIT_CAUSE: the scale misses the square root")
    local v1 = read_json(w1 .. "verify_1.json")
    expect.eq(v1.ok, true)
    local outcomes, why = {}, {}
    for _, a in ipairs(read_json(rd .. "/state.json").attempts) do outcomes[a.worker], why[a.worker] = a.outcome, a.promotion end
    expect.eq(outcomes[1], "improved", "the repaired kernel is far faster than slow.py: " .. tostring(why[1]))
    expect.eq(s.best.id, "r1w1")
    -- prompt caching: the shared block (system prompt with the skill catalogue, problem, parent)
    -- is written once and read by the calls after it
    local round = read_json(rd .. "/rounds/round_1/round.json")
    expect.truthy(round.tokens.cache_write >= 1024, "a cached prefix above the minimum: " .. tostring(round.tokens.cache_write))
    expect.truthy(round.tokens.cache_read >= 4 * 1024, "cache reads this round: " .. tostring(round.tokens.cache_read))
    -- memory: the repair chain under the attempt
    local db = assert(mem.open(dir .. "/mem.db"))
    local chain = 0
    for _, a in ipairs(db:history(s.memory_run_id, { limit = 100 })) do
      if a.role == "repair" then chain = chain + 1; expect.match(a.plan_signature, "AUDIT_CAUSE") end
    end
    expect.eq(chain, 1, "one repair stored")
    db:close()

    -- run 2: same kernel, same memory
    local rd2 = run_skill(dir, port, "runs2")
    local info2 = read_json(rd2 .. "/rounds/round_1/directions_input.json").info
    expect.truthy(info2.replanned, "the planner was asked again after the refusal")
    expect.truthy(#info2.refused >= 2, "both repeated plans refused by memory")
    expect.match(info2.refused[1].why, "tried before %(attempt #%d+")
    expect.eq(info2.planned, 2, "the gap filled from the ranked skills")
    for w = 1, 2 do
      local st = read_json(string.format("%s/rounds/round_1/w%d/strategy.json", rd2, w))[1]
      expect.ne(st.skill, "vectorization", "not re-planned: tried on this kernel")
      expect.eq(st.source, "rules")
    end
    local d2 = info2.retrieval
    expect.lt(rank_of(d2, "vectorization"), rank_of(d1, "vectorization"),
      "vectorization ranks higher after it succeeded (" .. rank_of(d1, "vectorization") .. " -> " .. rank_of(d2, "vectorization") .. ")")
    expect.match(d2.ranked[rank_of(d2, "vectorization")].why, "1/1 succeeded")
    local p2 = fs.read(rd2 .. "/rounds/round_1/w1/plan_prompt.txt")
    expect.match(p2, "earlier run", "the per-kernel history spans runs")
    expect.match(p2, "AUDIT_CAUSE", "and shows the repair chain")
    local stats = proc.run({ os.getenv("KAGENT_BIN") or "/proc/self/exe", "--env-file", "/dev/null", root .. "/agents/skills.lua",
      "--stats", "--db", dir .. "/mem.db" }, { timeout = 60 })
    server:kill()
    expect.eq(stats.code, 0, stats.stderr)
    expect.match(stats.stdout, "vectorization%s+1%s+1%s+1%.00", "the learned table")
  end, { timeout = 900 })
end)
