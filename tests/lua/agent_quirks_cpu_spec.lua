-- Replies as real models write them, end to end on the CPU: beam.lua, skill.lua, generate.lua and
-- fuse.lua against the FAKE LLM server in its quirks mode (tests/fixtures/fake_llm/quirks.py),
-- which answers each scripted (clean) reply the way models get it wrong: JSON in prose or in the
-- wrong fence, sloppy JSON, renamed and nested keys, several code blocks, class Model, a reply cut
-- at the length limit, <think> blocks, reasoning_content, refusals, empty replies, a diff, another
-- language, a context-length error. One mode at a time, then all of them mixed. Every run ends
-- normally; no model failure is recorded as a kernel failure; and the reply counts in
-- summary.json match, role by role, what the server's log says it served.
-- Candidates are pure PyTorch (CPU mode); needs a python with torch (KAGENT_PYTHON).
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs, json, mem = kagent.fs, kagent.json, kagent.mem
local fake = require("fake_session")
local fake_llm = dofile(kagent.root .. "/tests/fixtures/fake_llm/fake.lua")
local cpu = fake.cpu()
local root, fx, problem = kagent.root, cpu.fx, cpu.problem
local fenced = fake.fenced

-- What the agent does with each mode (docs/agents.md, "Replies as models write them"): read as
-- it came, read after a repair, or asked again (re-asked; lost when the re-ask is no better).
-- A context error is repaired by a shortened prompt (a "shortened" entry in the log).
local USED = { clean = true, prose_json = true, wrong_fence = true, several_blocks = true, think = true, reasoning_field = true }
local REPAIRED = { sloppy_json = true, nested_keys = true, model_class = true, diff = true, truncated = true }
local MODES = { "clean", "prose_json", "wrong_fence", "sloppy_json", "nested_keys", "several_blocks", "model_class",
  "truncated", "think", "reasoning_field", "refusal", "empty", "diff", "other_language", "context" }

-- expected(log) -> {role = {used, repaired, reasked, lost, continued, shortened}} from the server's log
local function expected(log)
  local out = {}
  for _, e in ipairs(log) do
    local c = out[e.role] or { used = 0, repaired = 0, reasked = 0, lost = 0, continued = 0, shortened = 0 }
    out[e.role] = c
    if e.kind == "first" then
      if USED[e.mode] then c.used = c.used + 1 elseif REPAIRED[e.mode] then c.repaired = c.repaired + 1 end
    elseif e.kind == "shortened" then
      c.shortened, c.repaired = c.shortened + 1, c.repaired + 1
    elseif e.kind == "continue" then
      c.continued = c.continued + 1
    elseif e.kind == "reask" then
      if USED[e.mode] or REPAIRED[e.mode] then c.reasked = c.reasked + 1 else c.lost = c.lost + 1 end
    end
  end
  return out
end

local FIELDS = { "used", "repaired", "reasked", "lost", "continued", "shortened" }

local function check_counts(s, log, what)
  local want = expected(log)
  local got = (s.replies or {}).by_role or {}
  for role, c in pairs(want) do
    for _, f in ipairs(FIELDS) do
      expect.eq((got[role] or {})[f] or 0, c[f], string.format("%s: %s %s (server log: %s)", what, role, f, json.encode(log)))
    end
  end
  for role in pairs(got) do
    if role ~= "directions" then
      local n = 0
      for _, f in ipairs({ "used", "repaired", "reasked", "lost" }) do n = n + (got[role][f] or 0) end
      expect.truthy(n == 0 or want[role], what .. ": replies of " .. role .. " counted that the server never served")
    end
  end
end

-- the scripts: clean replies, each rule naming the role (the agent's tag) it answers
local EV = { { metric = "time_ms", value = 1, interpretation = "slow" } }
local REFLEXION = fenced({ was_diagnosis_correct = true, was_fix_effective = true, expected_outcome = "faster",
  actual_outcome = "measured", reasoning = "scripted", lessons = { "one vectorised pass beats a per-channel loop" },
  avoid_patterns = {}, try_patterns = {} })

local function beam_script(q)
  return { latency = 0, quirks = q, replies = {
    { role = "diagnose", match = "# BOTTLENECK ANALYSIS", text = fenced({ bottlenecks = {
      { category = "memory", summary = "DIRECTION_ALPHA: statistics in a Python loop", skill = "fusion",
        reasoning = "many small ops", root_causes = { { cause = "loop", evidence = EV } },
        recommended_fixes = { { fix = "one pass", rationale = "fewer ops" } } } } }) },
    { role = "reflect", match = "# REFLEXION", text = REFLEXION },
    { role = "refine", match = "# REFINE KERNEL", text = cpu.code_block("fast.py") },
    { role = "optimize", match = "# OPTIMIZE KERNEL", text = cpu.code_block("broken.py"), times = 1 },
    { role = "optimize", match = "# OPTIMIZE KERNEL", text = cpu.code_block("fast.py") },
  } }
end

local function skill_script(q)
  return { latency = 0, quirks = q, replies = {
    { role = "plan", match = "# PLAN", text = fenced({ plans = {
      { skill = "vectorization", evidence = { { metric = "time_ms", value = 2.0, why = "a Python loop per channel" } },
        plan = "one vectorised pass over all channels", change = "replace the channel loop by one mean over dim 1",
        params = { passes = 1 } } } }) },
    { role = "audit", match = "# AUDIT FAILURE", text = fenced({ cause = "the scale misses the square root",
      evidence = "EMISMATCH at element 0", fix = "multiply by rsqrt(mean(x*x) + eps)" }) },
    { role = "repair", match = "# REPAIR KERNEL", text = cpu.code_block("fast.py") },
    { role = "reflect", match = "# REFLEXION", text = REFLEXION },
    { role = "optimize", match = "# OPTIMIZE KERNEL", text = cpu.code_block("broken.py"), times = 1 },
    { role = "optimize", match = "# OPTIMIZE KERNEL", text = cpu.code_block("fast.py") },
  } }
end

local function generate_script(q)
  return { latency = 0, quirks = q, replies = {
    { role = "refine", match = "# REFINE KERNEL", text = cpu.code_block("fast.py") },
    { role = "generate", match = "# GENERATE KERNEL", text = cpu.code_block("broken.py"), times = 1 },
    { role = "generate", match = "# GENERATE KERNEL", text = cpu.code_block("fast.py") },
  } }
end

local FUSE_FX = root .. "/tests/fixtures/fuse/cpu/"
local function fuse_code(name) return "Here is the kernel.\n```python\n" .. assert(fs.read(FUSE_FX .. name)) .. "```\n" end
local function v(name, shape) return { value = name, shape = shape } end
local function fuse_script(q)
  return { latency = 0, quirks = q, replies = {
    -- the vote has nothing to leave out of its prompt: a context error there is a failed call,
    -- and the rules decide (see tests/lua/agent_replies_spec.lua)
    { role = "route", match = "# ROUTE", text = fenced({ route = "decompose", reason = "scripted vote" }), skip_modes = { "context" } },
    { role = "decompose", match = "# DECOMPOSE INTO SUBGRAPHS", text = fenced({ subgraphs = {
      { name = "gemm_bias", ops = { "gemm", "add" }, inputs = { v("x", { 16, 64 }) }, outputs = { v("add", { 16, 32 }) },
        params = { "gemm.weight", "bias" } },
      { name = "gelu_scale", ops = { "gelu", "mul" }, inputs = { v("add", { 16, 32 }) }, outputs = { v("mul", { 16, 32 }) } } } }) },
    { role = "refine", match = "# REFINE KERNEL", text = fuse_code("gemm_add.py") },
    { role = "generate", match = "ops gemm, add.", text = fuse_code("gemm_add.py") },
    { role = "generate", match = "ops gelu, mul.", text = fuse_code("gelu_scale.py") },
  } }
end

local AGENTS = {
  beam = { script = beam_script, argv = { "--problem", problem, "--kernel", fx .. "slow.py", "--rounds", "1", "--beam", "1",
    "--directions", "1", "--refine", "2", "--finalists", "1" } },
  skill = { script = skill_script, argv = { "--problem", problem, "--kernel", fx .. "slow.py", "--rounds", "1",
    "--directions", "1", "--refine", "2", "--finalists", "1" } },
  generate = { script = generate_script, argv = { "--problem", problem, "--gen-workers", "1", "--refine", "2" } },
  fuse = { script = fuse_script, argv = { "--problem", root .. "/examples/problems/l2_gemm_bias_gelu_scale_small.py",
    "--gen-workers", "1", "--refine", "2" } },
}

local function tmpdir(tag)
  return spec.tmpdir(string.format("%s-%06d", tag, math.floor((kagent.time.now() % 1) * 1e6)))
end

-- run(name, quirks) -> summary, server log, run folder, memory path: agents/<name>.lua against the
-- fake server in quirks mode, streaming over the OpenAI route (reasoning_content shows there)
local function run(name, q, extra)
  local a = AGENTS[name]
  local dir = tmpdir("quirks-" .. name)
  local srv = fake_llm.start({ script = a.script(q), python = "python3" })
  local e = cpu.env(dir, srv.port)
  e.KAGENT_LLM_TIMEOUT, e.KAGENT_LLM_STREAM = false, false
  local argv = { "--devices", "cpu", "--out", dir .. "/runs", "--llm-backoff", "0.05" }
  -- every option here takes a value: extra's replace the agent's own
  local given = {}
  for i = 1, #(extra or {}), 2 do given[extra[i]] = true end
  for i = 1, #a.argv, 2 do
    if not given[a.argv[i]] then argv[#argv + 1], argv[#argv + 2] = a.argv[i], a.argv[i + 1] end
  end
  for _, x in ipairs(extra or {}) do argv[#argv + 1] = x end
  if name == "fuse" then argv[#argv + 1] = "--fresh" end
  local r = fake.run_agent(name .. ".lua", argv, e, 900)
  local st = srv:stats()
  srv:stop()
  local rd = fake.newest_run(dir .. "/runs")
  expect.eq(r.code, 0, string.format("%s.lua with quirks %s ends normally\n%s", name, json.encode(q), r.stderr:sub(-3000)))
  local s = json.decode(assert(fs.read(rd .. "/summary.json"), "no summary.json"))
  return s, st.quirks, rd, dir .. "/mem.db", r
end

-- no model failure recorded as a kernel failure: the only kernel that fails is the scripted broken
-- one (wrong values, stage correctness); no attempt fails at loading, compiling or a syntax error
local function check_no_kernel_failure(db_path, what)
  local db = assert(mem.open(db_path))
  local rows = db:query("SELECT role, stage, error_signature FROM attempts WHERE role != 'input'")
  db:close()
  for _, row in ipairs(rows) do
    local ok = row.stage == "llm_error" or row.stage == "improved" or row.stage == "same" or row.stage == "slower"
      or row.stage == "duplicate" or row.stage == "done" or row.stage == "correctness"
    expect.truthy(ok, string.format("%s: an attempt (%s) ended at stage %s (%s)", what, tostring(row.role), tostring(row.stage),
      tostring(row.error_signature)))
  end
end

describe("replies as models write them, one mode at a time", function()
  for _, name in ipairs({ "beam", "skill", "generate", "fuse" }) do
    it(name .. ".lua handles every failure mode alone, and its counts match the server's log", function()
      if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
      for _, mode in ipairs(MODES) do
        local s, log, _, db = run(name, { modes = { mode }, reask = "clean" })
        expect.truthy(#log > 0, name .. " " .. mode .. ": the server was asked")
        check_counts(s, log, name .. " " .. mode)
        check_no_kernel_failure(db, name .. " " .. mode)
      end
    end, { timeout = 3600 })
  end
end)

describe("a run whose model never gives a usable direction", function()
  it("says on its last line that its directions came from rules, and summary.json counts them", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local s, log, rd, _, r = run("beam", { modes = { "refusal" }, reask = "next" })
    check_counts(s, log, "beam refusing")
    local t = s.replies.totals
    expect.eq(t.rules_share, 1, "every direction from rules")
    expect.eq(t.directions_model, 0)
    expect.truthy(t.directions_rules >= 1)
    expect.eq(s.replies.rules_warn, 0.5, "the default --rules-warn")
    local last = r.stderr:match("([^\n]+)\n*$")
    expect.match(last, "^%s*WARNING: %d+ of %d+ directions %(100%%%) came from the skills' rules, not the model")
    expect.match(assert(fs.read(rd .. "/report.html")), "a mostly rule%-driven run")
  end, { timeout = 600 })
end)

-- The mixed runs: every mode in turn from a different place of the cycle, so that together they
-- serve each mode at least once; beam and skill get bad answers to re-asks too (lost replies),
-- generate and fuse (whose one worker has nothing else to fall back on) good ones.
local MIXED = {
  { name = "beam", quirks = { reask = "next", start = 0 }, extra = { "--rounds", "2", "--directions", "2" } },
  { name = "skill", quirks = { reask = "next", start = 8 }, extra = { "--rounds", "2", "--directions", "2" } },
  { name = "generate", quirks = { reask = "clean", start = 11 }, extra = {} },
  { name = "fuse", quirks = { reask = "clean", start = 4 }, extra = {} },
}
local served = {}

describe("replies as models write them, all modes mixed", function()
  for _, m in ipairs(MIXED) do
    it(m.name .. ".lua ends normally on every mode in turn, with exact counts", function()
      if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
      local s, log, rd, db = run(m.name, m.quirks, m.extra)
      for _, e in ipairs(log) do served[e.mode] = true end
      check_counts(s, log, m.name .. " mixed")
      check_no_kernel_failure(db, m.name .. " mixed")
      if m.name == "beam" or m.name == "skill" then  -- the searches write report.html
        local html = assert(fs.read(rd .. "/report.html"), "report.html")
        expect.match(html, "Replies by role")
        expect.match(html, 'id="replies"')
      end
    end, { timeout = 900 })
  end

  it("served every failure mode at least once", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    for _, mode in ipairs(MODES) do expect.truthy(served[mode], "mode " .. mode .. " was never served") end
  end)
end)
