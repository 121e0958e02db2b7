-- The first errors a newcomer meets, each with its way out: one line that names what to set,
-- the exit status, and (where it is promised) how soon. A python without torch, a --model whose
-- key is not set, a key the provider refuses (the FAKE LLM server answers 401 to the key "bad"),
-- a local server that is not running, a problem whose Model hangs, and no LLM at all (said once,
-- then the tuner runs); the refused key also for agents/generate.lua and agents/fuse.lua.
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs, proc, ktime = kagent.fs, kagent.proc, kagent.time
local session = require("fake_session")
local cpu = session.cpu()

local function agent(argv, env, timeout)
  local e = { KAGENT_PYTHON = spec.python, ANTHROPIC_API_KEY = false, OPENAI_API_KEY = false, KAGENT_LLM_URL = false,
    KAGENT_MODEL = false, OPENAI_BASE_URL = false, KAGENT_LLM_CACHE = false, KAGENT_PROGRESS = "lines" }
  for k, v in pairs(env or {}) do e[k] = v end
  local t0 = ktime.now()
  local r = session.run_agent("beam.lua", argv, e, timeout or 300)
  r.wall = ktime.now() - t0
  return r
end

local count = spec.count

local function lines(text)
  local out = {}
  for l in text:gmatch("[^\n]+") do out[#out + 1] = l end
  return out
end

-- a free loopback port: one the fake server had and gave back (nothing listens there now)
local function dead_port(dir)
  local p, port = session.start({ replies = {} }, dir)
  p:kill("KILL")
  p:wait(5)
  return port
end

describe("a newcomer's errors", function()
  it("a python without torch: one line naming that python and KAGENT_PYTHON, exit 2", function()
    local dir = spec.tmpdir("err-python")
    -- a FAKE python without torch: the system python without its site packages
    local python = dir .. "/python-without-torch"
    fs.write(python, string.format('#!/bin/sh\nexec "%s" -S "$@"\n', spec.python))
    expect.eq(proc.run({ "chmod", "+x", python }).code, 0)
    local r = agent({ "--problem", cpu.problem, "--kernel", cpu.fx .. "tunable.py", "--devices", "cpu",
      "--out", dir .. "/runs" }, { KAGENT_PYTHON = python, KAGENT_DB = dir .. "/mem.db" })
    expect.eq(r.code, 2, r.stderr)
    expect.falsy(r.stderr:find("Traceback", 1, true), "no traceback:\n" .. r.stderr)
    local said = r.stderr:match("[^\n]*cannot import torch[^\n]*")
    expect.truthy(said, "the reason:\n" .. r.stderr)
    expect.truthy(said:find(python, 1, true), "names the python: " .. said)
    expect.truthy(said:find("KAGENT_PYTHON", 1, true), "names the variable: " .. said)
    expect.eq(count(r.stderr, "cannot import torch"), 1, "said once:\n" .. r.stderr)
  end, { timeout = 300 })

  it("--model openai:gpt-4.1 with no key: exit 2 naming OPENAI_API_KEY, no tuner, nothing started", function()
    local dir = spec.tmpdir("err-nokey")
    local r = agent({ "--problem", cpu.problem, "--kernel", cpu.fx .. "tunable.py", "--model", "openai:gpt-4.1",
      "--out", dir .. "/runs" }, { KAGENT_DB = dir .. "/mem.db" })
    expect.eq(r.code, 2, r.stderr)
    expect.eq(#lines(r.stderr), 1, "one line:\n" .. r.stderr)
    expect.truthy(r.stderr:find("OPENAI_API_KEY is not set", 1, true), r.stderr)
    expect.falsy(r.stderr:find("tuner", 1, true), "no fallback to the tuner")
    expect.falsy(fs.exists(dir .. "/runs"), "no run folder")
  end, { timeout = 120 })

  it("a key the provider refuses (401): refused by the check before any work, exit 2, said once", function()
    local dir = spec.tmpdir("err-badkey")
    local srv, port = session.start({ replies = {} }, dir)
    local env = session.env(port, { OPENAI_API_KEY = "bad", KAGENT_PYTHON = spec.python, KAGENT_DB = dir .. "/mem.db" })
    local r = agent({ "--problem", cpu.problem, "--kernel", cpu.fx .. "tunable.py", "--devices", "cpu", "--rounds", "2",
      "--out", dir .. "/runs" }, env, 600)
    local stats = kagent.json.decode(assert(kagent.http.request({ url = "http://127.0.0.1:" .. port .. "/_stats" })).body)
    srv:kill("KILL")
    srv:wait(5)
    expect.eq(r.code, 2, r.stderr)
    expect.eq(count(r.stderr, "refused the API key in OPENAI_API_KEY (HTTP 401)"), 1, r.stderr)
    expect.falsy(r.stderr:find("in a row", 1, true), "not counted as an outage:\n" .. r.stderr)
    expect.truthy(r.stderr:find("Fix the key and run again", 1, true), "says what to do: " .. r.stderr)
    expect.falsy(fs.exists(dir .. "/runs"), "no run folder")
    -- the LLM's check (GET /v1/models) is the one request refused: no model call was made
    expect.eq(stats.auth_failures, 1, "calls refused")
    expect.eq(stats.requests["/v1/chat/completions"], nil, "no model call")
  end, { timeout = 600 })

  for _, name in ipairs({ "generate", "fuse" }) do
    it(name .. ".lua with a key the provider refuses: exit 2, saying so, not an outage", function()
      if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
      local dir = spec.tmpdir("err-badkey-" .. name)
      local srv, port = session.start({ replies = {} }, dir)
      local env = session.env(port, { OPENAI_API_KEY = "bad", KAGENT_PYTHON = spec.python, KAGENT_DB = dir .. "/mem.db",
        ANTHROPIC_API_KEY = false, KAGENT_LLM_CACHE = false, KAGENT_PROGRESS = "lines" })
      local r = session.run_agent(name .. ".lua", { "--problem", cpu.problem, "--devices", "cpu", "--out", dir .. "/runs" },
        env, 600)
      srv:kill("KILL")
      srv:wait(5)
      expect.eq(r.code, 2, r.stderr)
      expect.truthy(r.stderr:find("refused the API key in OPENAI_API_KEY (HTTP 401)", 1, true), r.stderr)
      expect.truthy(r.stderr:find("Fix the key and run again", 1, true), r.stderr)
      expect.falsy(r.stderr:find("try again later", 1, true), "not called an outage:\n" .. r.stderr)
    end, { timeout = 600 })
  end

  it("a local server that is not running: refused in under 2 s, exit 3, naming the URL", function()
    local dir = spec.tmpdir("err-refused")
    local url = "http://127.0.0.1:" .. dead_port(dir) .. "/v1"
    for _, model in ipairs({ false, "openai:qwen" }) do
      local r = agent({ "--problem", cpu.problem, "--kernel", cpu.fx .. "tunable.py", "--out", dir .. "/runs" },
        { KAGENT_LLM_URL = url, KAGENT_MODEL = model, KAGENT_DB = dir .. "/mem.db" })
      local what = "KAGENT_MODEL=" .. tostring(model)
      expect.eq(r.code, 3, what .. "\n" .. r.stderr)
      expect.eq(#lines(r.stderr), 1, what .. ": one line:\n" .. r.stderr)
      expect.truthy(r.stderr:find("nothing listens at " .. url .. " (connection refused)", 1, true), what .. ": " .. r.stderr)
      expect.truthy(r.wall < 2, string.format("%s: %.2f s", what, r.wall))
    end
  end, { timeout = 120 })

  it("no LLM and a policy named that needs one: refused, nothing started, exit 2", function()
    local dir = spec.tmpdir("err-named-policy")
    local r = agent({ "--problem", cpu.problem, "--kernel", cpu.fx .. "tunable.py", "--devices", "cpu", "--policy", "greedy",
      "--out", dir .. "/runs" }, { KAGENT_DB = dir .. "/mem.db" })
    expect.eq(r.code, 2, r.stderr)
    expect.match(r.stderr, "%-%-policy greedy needs an LLM: no LLM is configured")
    expect.falsy(fs.exists(dir .. "/runs"), "no run folder")
  end)

  it("a problem whose Model hangs: stopped at --job-timeout, saying the problem or the kernel hangs", function()
    local dir = spec.tmpdir("err-hang")
    local r = agent({ "--problem", kagent.root .. "/tests/fixtures/agent/problems/hanging_model.py",
      "--kernel", cpu.fx .. "tunable.py", "--devices", "cpu", "--job-timeout", "10", "--out", dir .. "/runs" },
      { KAGENT_DB = dir .. "/mem.db" }, 300)
    expect.eq(r.code, 2, r.stderr)
    expect.match(r.stderr, "the evaluator job of the input kernel was stopped %(EWORKER: no reply in 10 s")
    expect.match(r.stderr, "the problem's own Model or the kernel hangs, or the job needs more than %-%-job%-timeout 10 s")
  end, { timeout = 300 })

  it("no LLM at all: said once, then the tuner runs", function()
    local dir = spec.tmpdir("err-nollm")
    -- --rounds 0: only the start of the run is wanted here
    local n = agent({ "--problem", cpu.problem, "--kernel", cpu.fx .. "tunable.py", "--devices", "cpu", "--rounds", "0",
      "--out", dir .. "/runs" }, { KAGENT_DB = dir .. "/mem.db" }, 600)
    expect.eq(count(n.stderr, "no LLM"), 1, "said once:\n" .. n.stderr)
    expect.eq(count(n.stderr, "ANTHROPIC_API_KEY"), 1, "the variables named once:\n" .. n.stderr)
    expect.truthy(n.stderr:find("Falling back to the LLM-free tuner", 1, true), n.stderr)
  end, { timeout = 600 })
end)
