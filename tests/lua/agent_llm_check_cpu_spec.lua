-- The LLM checked before any work (issue #57): every entry point that uses an LLM asks the server
-- once (GET /v1/models) before an evaluator worker starts, and stops with exit 2 and one message
-- where it refuses the key (401) or does not serve the model (404: a model it does not list, a
-- URL without /v1); a bad option is said before any network; a call refused mid-run (401, 404) stops the run at once, said once. Against the FAKE LLM server
-- (tests/fixtures/fake_llm). The evaluator's python is a wrapper that marks when a worker starts
-- (then fails it at once, so no case needs torch or runs a search).
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs = kagent.fs
local session = require("fake_session")
local fake_llm = dofile(kagent.root .. "/tests/fixtures/fake_llm/fake.lua")
local cpu = session.cpu()

local count = spec.count

local function lines(text)
  local n = 0
  for _ in text:gmatch("[^\n]+") do n = n + 1 end
  return n
end

-- run(name, dir, env, extra_argv) -> the result of agents/<name> on the CPU problem, with
-- `started` = whether an evaluator worker was started
local function run(name, dir, env, extra)
  fs.mkdir_p(dir)
  local marker = dir .. "/worker-started"
  local e = cpu.env(dir, 1)
  e.KAGENT_PYTHON = session.python_wrapper(dir, "touch " .. marker .. "; exit 1")
  e.ANTHROPIC_API_KEY, e.KAGENT_LLM_CHECK = false, false
  for k, v in pairs(env) do e[k] = v end
  local argv = { "--problem", cpu.problem, "--devices", "cpu", "--out", dir .. "/runs" }
  if name == "beam.lua" then argv[#argv + 1] = "--kernel"; argv[#argv + 1] = cpu.fx .. "slow.py" end
  for _, a in ipairs(extra or {}) do argv[#argv + 1] = a end
  local r = session.run_agent(name, argv, e, 300)
  r.started = fs.exists(marker)
  return r
end

local function stopped_before_work(r, dir, what)
  expect.eq(r.code, 2, what .. ": exit status\n" .. r.stderr)
  expect.eq(lines(r.stderr), 1, what .. ": one line\n" .. r.stderr)
  expect.truthy(r.stderr:find("Nothing was started", 1, true), what .. ": " .. r.stderr)
  expect.falsy(r.started, what .. ": no evaluator worker started")
  expect.falsy(fs.exists(dir .. "/runs"), what .. ": no run folder")
end

describe("the LLM checked before any work", function()
  for _, name in ipairs({ "beam.lua", "generate.lua", "fuse.lua" }) do
    it(name .. ": a refused key (401) stops it before any worker, exit 2, said once", function()
      local dir = spec.tmpdir("check-401-" .. name)
      local srv = fake_llm.start({ script = { replies = {} } })
      local r = run(name, dir, { KAGENT_LLM_URL = srv.url .. "/v1", KAGENT_MODEL = "openai:fake", OPENAI_API_KEY = "bad" })
      local st = srv:stats()
      srv:stop()
      stopped_before_work(r, dir, name)
      expect.eq(count(r.stderr, "refused the API key in OPENAI_API_KEY (HTTP 401)"), 1, r.stderr)
      expect.truthy(r.stderr:find("Fix the key and run again", 1, true), r.stderr)
      expect.eq(st.requests["/v1/models"], 1, "one request")
      expect.eq(st.requests["/v1/chat/completions"], nil, "no model call")
    end, { timeout = 300 })
  end

  it("a model the vLLM server does not serve (404): exit 2 naming the models it lists, said once", function()
    local dir = spec.tmpdir("check-404-model")
    local srv = fake_llm.start({ script = { replies = {} }, flavor = "vllm" })
    local r = run("beam.lua", dir, { KAGENT_LLM_URL = srv.url .. "/v1", KAGENT_MODEL = "openai:qwen-coder-typo",
      OPENAI_API_KEY = false })
    local st = srv:stats()
    srv:stop()
    stopped_before_work(r, dir, "unknown model")
    expect.eq(count(r.stderr, "does not serve the model 'qwen-coder-typo'"), 1, r.stderr)
    expect.truthy(r.stderr:find("it lists Qwen/Qwen2.5-Coder-7B-Instruct", 1, true), r.stderr)
    expect.eq(st.requests["/v1/chat/completions"], nil, "not retried as an outage: no model call")
  end, { timeout = 300 })

  it("--model worker=...: a model of the mixture that is not served is found too", function()
    local dir = spec.tmpdir("check-404-mixture")
    local srv = fake_llm.start({ script = { replies = {} } })
    local r = run("beam.lua", dir, { KAGENT_LLM_URL = srv.url .. "/v1", KAGENT_MODEL = false, OPENAI_API_KEY = "sk-test" },
      { "--model", "openai:fake", "--model", "worker=openai:fake,openai:gpt-9-nonexistent" })
    srv:stop()
    stopped_before_work(r, dir, "mixture")
    expect.truthy(r.stderr:find("--model openai:fake --model worker=openai:fake,openai:gpt-9-nonexistent: ", 1, true),
      "names the option: " .. r.stderr)
    expect.truthy(r.stderr:find("'gpt-9-nonexistent'", 1, true), r.stderr)
  end, { timeout = 300 })

  it("a URL without /v1 (404 on /models): exit 2 suggesting /v1, said once, with or without a model", function()
    local dir = spec.tmpdir("check-404-url")
    local srv = fake_llm.start({ script = { replies = {} }, flavor = "vllm" })
    for i, model in ipairs({ "openai:Qwen/Qwen2.5-Coder-7B-Instruct", false }) do
      local sub = dir .. "/" .. i
      local r = run("beam.lua", sub, { KAGENT_LLM_URL = srv.url, KAGENT_MODEL = model, OPENAI_API_KEY = false })
      local what = "KAGENT_MODEL=" .. tostring(model)
      expect.eq(r.code, 2, what .. "\n" .. r.stderr)
      expect.eq(lines(r.stderr), 1, what .. ": one line\n" .. r.stderr)
      expect.eq(count(r.stderr, "try KAGENT_LLM_URL=" .. srv.url .. "/v1"), 1, what .. ": " .. r.stderr)
      expect.falsy(r.stderr:find("'nil'", 1, true), what .. ": " .. r.stderr)
      expect.falsy(r.started, what .. ": no evaluator worker started")
    end
    expect.eq(srv:stats().requests["/v1/chat/completions"], nil, "no model call")
    srv:stop()
  end, { timeout = 300 })

  it("a model the server lists (vLLM; Anthropic by its alias): one request, then the workers start", function()
    local dir = spec.tmpdir("check-ok")
    local srv = fake_llm.start({ script = { replies = {} }, flavor = "vllm" })
    local routes = {
      vllm = { KAGENT_LLM_URL = srv.url .. "/v1", KAGENT_MODEL = "openai:Qwen/Qwen2.5-Coder-7B-Instruct", OPENAI_API_KEY = false },
      anthropic = { KAGENT_LLM_URL = false, OPENAI_API_KEY = false, ANTHROPIC_BASE_URL = srv.url,
        ANTHROPIC_API_KEY = "sk-ant-test-check", KAGENT_MODEL = "anthropic:claude-sonnet-4-5" },
    }
    for route, env in pairs(routes) do
      srv:reset()
      local r = run("beam.lua", dir .. "/" .. route, env)
      local st = srv:stats()
      expect.eq(st.requests["/v1/models"], 1, route .. ": one request")
      expect.truthy(r.started, route .. ": the workers were started after the check\n" .. r.stderr)
      expect.truthy(r.stderr:find("no evaluator worker started", 1, true), "the FAKE worker failed, as scripted: " .. r.stderr)
    end
    srv:stop()
  end, { timeout = 300 })

  it("KAGENT_LLM_CHECK=0 skips the check where a server has no model list", function()
    local dir = spec.tmpdir("check-skip")
    local srv = fake_llm.start({ script = { replies = {}, models_reply = { status = 404 } } })
    local env = { KAGENT_LLM_URL = srv.url .. "/v1", KAGENT_MODEL = "openai:fake", OPENAI_API_KEY = "sk-test" }
    local refused = run("beam.lua", dir .. "/a", env)
    expect.eq(refused.code, 2, refused.stderr)
    expect.truthy(refused.stderr:find("KAGENT_LLM_CHECK=0", 1, true), "names the way out: " .. refused.stderr)
    expect.falsy(refused.started)
    srv:reset()
    env.KAGENT_LLM_CHECK = "0"
    local skipped = run("beam.lua", dir .. "/b", env)
    local st = srv:stats()
    srv:stop()
    expect.truthy(skipped.started, "the run went on\n" .. skipped.stderr)
    expect.eq(st.requests["/v1/models"], nil, "nothing asked")
  end, { timeout = 300 })

  -- what the check cannot see: a key revoked after it, a model listed that a call does not reach
  for _, c in ipairs({ { 401, "key revoked meanwhile", "Fix the key, then continue with:" },
      { 404, "no route for this model", "Fix the model name or the URL, then continue with:" } }) do
    it("a call refused mid-run (HTTP " .. c[1] .. "): the run stops at once, exit 2, said once, no outage", function()
      if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
      local dir = spec.tmpdir("check-midrun-" .. c[1])
      -- the FAKE server lists its models to the key, then refuses every model call
      local srv = fake_llm.start({ script = { replies = { { status = c[1], error_message = c[2] } } } })
      local e = cpu.env(dir, 1)
      e.KAGENT_LLM_URL, e.OPENAI_API_KEY, e.ANTHROPIC_API_KEY = srv.url .. "/v1", "sk-test-revoked", false
      local r = session.run_agent("beam.lua", { "--problem", cpu.problem, "--kernel", cpu.fx .. "slow.py", "--devices", "cpu",
        "--out", dir .. "/runs", "--rounds", "2", "--beam", "1", "--directions", "2" }, e, 600)
      local st = srv:stats()
      srv:stop()
      expect.eq(r.code, 2, r.stderr:sub(-2000))
      expect.eq(count(r.stderr, c[2]), 1, "the provider's words once:\n" .. r.stderr)
      expect.truthy(r.stderr:find(c[3], 1, true), r.stderr:sub(-1500))
      expect.falsy(r.stderr:find("in a row", 1, true), "not an outage:\n" .. r.stderr:sub(-1500))
      expect.eq(st.requests["/v1/chat/completions"], 1, "the first refusal stops the calls")
    end, { timeout = 600 })
  end

  it("--devices 7 with nothing listening at KAGENT_LLM_URL: exit 2 naming the option, before any network", function()
    local dir = spec.tmpdir("check-devices")
    local p, port = session.start({ replies = {} }, dir)
    p:kill("KILL")
    p:wait(5)
    local r = run("beam.lua", dir, { KAGENT_LLM_URL = "http://127.0.0.1:" .. port .. "/v1", KAGENT_MODEL = "openai:fake",
      OPENAI_API_KEY = "sk-test" }, { "--devices", "7" })
    expect.eq(r.code, 2, r.stderr)
    expect.eq(lines(r.stderr), 1, r.stderr)
    expect.truthy(r.stderr:find("--devices 7: there is no GPU 7 here", 1, true), r.stderr)
    expect.falsy(r.stderr:find("does not answer", 1, true), "not an outage: " .. r.stderr)
    expect.falsy(r.started)
  end, { timeout = 300 })
end)
