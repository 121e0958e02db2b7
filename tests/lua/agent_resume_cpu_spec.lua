-- --resume for every policy, on the CPU against the FAKE LLM server
-- (tests/fixtures/fake_llm/server.py): each policy runs one round, then a second process resumes
-- the run folder for a second round, with the same memory run and the attempts of both. The
-- example policy (examples/policies/rule_sweep.lua) runs end to end the same way.
-- Candidates are pure PyTorch (CPU mode); needs a python with torch (KAGENT_PYTHON).
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs, json, proc = kagent.fs, kagent.json, kagent.proc
local fake = require("fake_session")
local cpu = fake.cpu()
local root, fx, problem = kagent.root, cpu.fx, cpu.problem

local fenced = fake.fenced
local EV = { { metric = "time_ms", value = 1, interpretation = "slow" } }

-- every role of every shipped policy has an answer; each rewrite is the fast kernel
local SCRIPT = { latency = 0, replies = {
  { match = "# BOTTLENECK ANALYSIS", text = fenced({ bottlenecks = {
    { category = "memory", summary = "statistics in a Python loop", skill = "fusion", root_causes = { { cause = "loop", evidence = EV } } },
    { category = "latency", summary = "one channel at a time", skill = "ilp", root_causes = { { cause = "serial", evidence = EV } } } } }) },
  { match = "# PLAN", text = fenced({ plans = {
    { skill = "ilp", evidence = EV, plan = "all channels at once", change = "one mean over dim 1", params = { rows = 64 } } } }) },
  { match = "# REFLEXION", text = fenced({ was_fix_effective = true, lessons = { "vectorise over channels" } }) },
  { match = "# OPTIMIZE KERNEL", text = cpu.code_block("fast.py") },
} }

local function run(dir, port, argv)
  local a = { "--problem", problem, "--devices", "cpu", "--out", dir .. "/runs", "--refine", "0" }
  for _, x in ipairs(argv) do a[#a + 1] = x end
  local env = fake.env(port, { KAGENT_PYTHON = spec.python, KAGENT_DB = dir .. "/mem.db", OPENAI_BASE_URL = false,
    ANTHROPIC_BASE_URL = false })
  local r = fake.run_agent("beam.lua", a, env, 600)
  if r.code ~= 0 then error("beam.lua " .. table.concat(argv, " ") .. " exited " .. r.code .. "\n" .. r.stderr:sub(-3000)) end
  return r
end

local function read_json(path) return json.decode(assert(fs.read(path), "missing " .. path)) end

local CASES = {
  { "beam", fx .. "slow.py" }, { "greedy", fx .. "slow.py" }, { "skill", fx .. "slow.py" },
  { "tune", fx .. "tunable.py", { "--tune-candidates", "1" } },
  { root .. "/examples/policies/rule_sweep.lua", fx .. "slow.py" },
}

describe("--resume", function()
  for _, c in ipairs(CASES) do
    local name = c[1]:match("([^/]+)%.lua$") or c[1]
    it("continues a " .. name .. " run in a second process", function()
      if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
      local dir = spec.tmpdir("resume-" .. name)
      local server, port = fake.start(SCRIPT, dir)
      local argv = { "--policy", c[1], "--kernel", c[2], "--rounds", "1", "--directions", "1", "--beam", "1" }
      for _, x in ipairs(c[3] or {}) do argv[#argv + 1] = x end
      run(dir, port, argv)
      local rd = fake.newest_run(dir .. "/runs")
      local s1 = read_json(rd .. "/summary.json")
      local st1 = read_json(rd .. "/state.json")
      expect.eq(s1.rounds, 1)
      expect.truthy(s1.attempts >= 1, "round 1 ran its workers")
      run(dir, port, { "--resume", rd, "--rounds", "2" })
      server:kill()
      local s2 = read_json(rd .. "/summary.json")
      expect.eq(s2.policy, s1.policy, "resumed with the run's own policy")
      expect.eq(s2.memory_run_id, s1.memory_run_id, "the same memory run")
      expect.truthy(s2.tokens.total >= s1.tokens.total, "usage carried over: " .. s1.tokens.total .. " -> " .. s2.tokens.total)
      if st1.stop_reason == json.null or st1.stop_reason == nil then
        expect.eq(s2.rounds, 2)
        expect.truthy(fs.exists(rd .. "/rounds/round_2/w1/kernel.py"), "round 2 in the same folder")
        expect.truthy(s2.attempts > s1.attempts, "attempts of both processes")
      else
        -- a run that stopped (the tuner converged) stays stopped, with its reason
        expect.eq(s2.stop_reason, st1.stop_reason)
        expect.eq(s2.rounds, 1)
      end
    end, { timeout = 600 })
  end
end)
