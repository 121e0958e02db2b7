-- Secrets end to end on the CPU: agents/beam.lua against the FAKE LLM server
-- (tests/fixtures/fake_llm/server.py, which records every prompt), whose optimizer replies with a
-- hostile candidate (tests/fixtures/agent/cpu/hostile.py) that prints its environment, reads every
-- /proc/<pid>/environ it can see and echoes KAGENT_EVAL_TEST_ECHO, set to the runtime's fake API
-- key. The key must appear nowhere: not in the run directory, the memory database, the log or any
-- prompt; its echo must arrive redacted.
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs, json, proc = kagent.fs, kagent.json, kagent.proc
local fake = require("fake_session")
local cpu = fake.cpu()
local root, problem = kagent.root, cpu.problem

local function script()
  local hostile = "Faster.\n```python\n" .. assert(fs.read(root .. "/tests/fixtures/agent/cpu/hostile.py")) .. "```\n"
  local diagnosis = { bottlenecks = { { category = "memory", summary = "DIRECTION_ALPHA: two passes over x",
    skill = "fusion", reasoning = "x is read twice",
    root_causes = { { cause = "two passes", evidence = { { metric = "time_ms", value = 1, interpretation = "slow" } } } },
    recommended_fixes = { { fix = "one pass", rationale = "read x once" } } } } }
  return { latency = 0, replies = {
    { match = "# BOTTLENECK ANALYSIS", text = "```json\n" .. json.encode(diagnosis) .. "\n```" },
    { match = "# REFLEXION", text = "```json\n" .. json.encode({ was_diagnosis_correct = false, was_fix_effective = false,
      expected_outcome = "faster", actual_outcome = "failed", reasoning = "scripted", lessons = { "scripted lesson" },
      avoid_patterns = {}, try_patterns = {} }) .. "\n```" },
    { match = "DIRECTION_ALPHA", text = hostile },
  } }
end

-- every file under dir, recursively: path -> contents
local function files_under(dir, out)
  out = out or {}
  for _, name in ipairs(fs.list(dir) or {}) do
    local path = dir .. "/" .. name
    if fs.is_dir(path) then files_under(path, out) else out[path] = fs.read(path) or "" end
  end
  return out
end

describe("agents/beam.lua with a hostile candidate and a key in the runtime's environment", function()
  it("leaves the key nowhere: run directory, database, log, prompts", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("agent-secrets")
    local key = string.format("fake-openai-%08x%08x", math.random(0, 0x7fffffff), math.random(0, 0x7fffffff))
    local server, port = fake.start(script(), dir)
    local env = fake.env(port, { OPENAI_API_KEY = key, KAGENT_EVAL_TEST_ECHO = key, KAGENT_PYTHON = spec.python,
      KAGENT_DB = dir .. "/mem.db" })
    local r = fake.run_agent("beam.lua", { "--problem", problem, "--kernel", root .. "/examples/kernels/cpu/rmsnorm_small_chunked.py",
      "--rounds", "1", "--directions", "1", "--refine", "1", "--devices", "cpu", "--out", dir .. "/runs" }, env, 600)
    local stats = json.decode(assert(proc.run({ "python3", "-c",
      "import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:" .. port .. "/_stats?texts=1').read().decode())" })).stdout)
    server:kill()
    if r.code ~= 0 then error("beam.lua exited " .. r.code .. "\n" .. r.stderr:sub(-3000)) end

    local texts = files_under(dir)
    texts["the log (stderr)"], texts["stdout"] = r.stderr, r.stdout
    for i, t in ipairs(stats.texts or {}) do texts["prompt " .. i] = t end
    local echoed, printed = 0, 0
    for where, text in pairs(texts) do
      expect.falsy(text:find(key, 1, true), "the key in " .. where)
      if text:find("KAGENT_EVAL_TEST_ECHO=[redacted OPENAI_API_KEY]", 1, true) then echoed = echoed + 1 end
      if text:find("env: PATH=", 1, true) then printed = printed + 1 end
    end
    expect.truthy(echoed > 0, "the candidate's echo of the key arrived, redacted")
    expect.truthy(printed > 0, "the candidate's environment dump arrived")
    local refine = 0
    for _, t in ipairs(stats.texts or {}) do
      if t:find("[redacted OPENAI_API_KEY]", 1, true) then refine = refine + 1 end
    end
    expect.truthy(refine > 0, "the candidate's error went back to the LLM, redacted")
    proc.run({ "rm", "-rf", dir })
  end, { timeout = 900 })
end)
