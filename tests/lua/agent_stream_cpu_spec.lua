-- agents/beam.lua end to end with streamed replies, on the CPU against the FAKE LLM server shaped
-- like a vLLM and a llama.cpp server (tests/fixtures/fake_llm, --flavor): no KAGENT_MODEL (the
-- server lists one model, which the run uses), streaming on (the default, or --stream, or KAGENT_LLM_STREAM=1),
-- every call streamed, and the status line showing tokens per second. Needs a python with torch.
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs, json = kagent.fs, kagent.json
local session = require("fake_session")
local fake_llm = dofile(kagent.root .. "/tests/fixtures/fake_llm/fake.lua")
local cpu = session.cpu()

local EV = { { metric = "time_ms", value = 1, interpretation = "slow" } }
local SCRIPT = { latency = 0, chunk_delay = 0.002, replies = {
  { match = "# REFLEXION", text = session.fenced({ was_fix_effective = true, lessons = { "one mean over dim 1" } }) },
  { match = "# BOTTLENECK ANALYSIS", text = session.fenced({ bottlenecks = {
    { category = "memory", summary = "statistics in a Python loop", skill = "fusion", root_causes = { { cause = "loop", evidence = EV } } } } }) },
  { match = "# OPTIMIZE KERNEL", text = cpu.code_block("fast.py") },
} }

local CASES = {
  { flavor = "vllm", model = "Qwen/Qwen2.5-Coder-7B-Instruct", argv = { "--stream" }, env = {} },
  { flavor = "llamacpp", model = "qwen2.5-coder-7b-instruct-q4_k_m.gguf", argv = {}, env = { KAGENT_LLM_STREAM = "1" } },
}

describe("agents/beam.lua streaming", function()
  for _, c in ipairs(CASES) do
    it("runs end to end against a " .. c.flavor .. "-style server with no KAGENT_MODEL, showing tokens per second", function()
      if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
      local dir = spec.tmpdir("stream-" .. c.flavor)
      local srv = fake_llm.start({ script = SCRIPT, flavor = c.flavor })
      local env = session.env(srv.port, { KAGENT_PYTHON = spec.python, KAGENT_DB = dir .. "/mem.db", KAGENT_MODEL = false,
        OPENAI_API_KEY = false, OPENAI_BASE_URL = false, ANTHROPIC_BASE_URL = false, KAGENT_LLM_STREAM = false })
      for k, v in pairs(c.env) do env[k] = v end
      local argv = { "--problem", cpu.problem, "--kernel", cpu.fx .. "slow.py", "--devices", "cpu", "--out", dir .. "/runs",
        "--rounds", "1", "--beam", "1", "--directions", "1", "--refine", "0" }
      for _, a in ipairs(c.argv) do argv[#argv + 1] = a end
      local r = session.run_agent("beam.lua", argv, env, 600)
      local stats = srv:stats(true)
      srv:stop()
      expect.eq(r.code, 0, "beam.lua\n" .. r.stderr:sub(-2500))
      local s = json.decode(fs.read(session.newest_run(dir .. "/runs") .. "/summary.json"))
      expect.eq(s.model, "openai:" .. c.model, "the one model the server lists")
      expect.eq(s.mode, "llm")
      expect.truthy(s.llm_calls >= 3, "diagnose, optimize, reflect: " .. tostring(s.llm_calls))
      local calls, streamed = 0, 0
      for _, body in ipairs(stats.bodies or {}) do
        local b = type(body) == "string" and json.decode(body) or body
        calls = calls + 1
        if b.stream == true then streamed = streamed + 1 end
        expect.eq(b.model, c.model, "the request names the served model")
      end
      expect.truthy(calls >= 3, "the server saw the calls")
      expect.eq(streamed, calls, "every call streamed")
      local rate = r.stderr:match("%((%d+) tok/s%)")
      expect.truthy(rate and tonumber(rate) > 0, "the status line shows tokens per second:\n" .. r.stderr:sub(-1500))
    end, { timeout = 600 })
  end

  it("with streaming turned off (KAGENT_LLM_STREAM=0) the status line shows no rate", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("stream-off")
    local srv = fake_llm.start({ script = SCRIPT, flavor = "vllm" })
    local env = session.env(srv.port, { KAGENT_PYTHON = spec.python, KAGENT_DB = dir .. "/mem.db", KAGENT_MODEL = false,
      OPENAI_API_KEY = false, OPENAI_BASE_URL = false, ANTHROPIC_BASE_URL = false, KAGENT_LLM_STREAM = "0" })
    local r = session.run_agent("beam.lua", { "--problem", cpu.problem, "--kernel", cpu.fx .. "slow.py", "--devices", "cpu",
      "--out", dir .. "/runs", "--rounds", "1", "--beam", "1", "--directions", "1", "--refine", "0" }, env, 600)
    srv:stop()
    expect.eq(r.code, 0, r.stderr:sub(-2000))
    expect.no_match(r.stderr, "tok/s")
  end, { timeout = 600 })
end)
