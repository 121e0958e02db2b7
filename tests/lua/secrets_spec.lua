-- kagent.secrets: the environment allow-list for workers and the one redaction step, in process
-- and end to end (a child kagent-rt with fake keys in its environment and its .env, a real
-- CPU-mode worker, and a candidate that echoes the keys: tests/fixtures/adversarial/cpu_secret_echo.py).
local secrets = require("kagent.secrets")
local fs, json, proc = kagent.fs, kagent.json, kagent.proc

local function fake_key(tag)
  return string.format("fake-%s-%08x%08x", tag, math.random(0, 0x7fffffff), math.random(0, 0x7fffffff))
end

describe("kagent.secrets", function()
  it("tells secret names by their words", function()
    for _, n in ipairs({ "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "KAGENT_LLM_KEY", "HF_TOKEN",
      "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "my_auth_cookie" }) do
      expect.truthy(secrets.looks_secret(n), n)
    end
    for _, n in ipairs({ "PATH", "MONKEYS", "TOKENIZER_DIR", "KAGENT_EVAL_MEMORY_MB" }) do
      expect.falsy(secrets.looks_secret(n), n)
    end
  end)

  it("passes workers only the allow-list, never a secret name", function()
    -- ATEN_CPU_CAPABILITY: .ci/run runs the evaluator tests with PyTorch's baseline CPU kernels
    for _, n in ipairs({ "PATH", "LC_ALL", "CUDA_VISIBLE_DEVICES", "TRITON_CACHE_DIR", "KAGENT_EVAL_SPARE", "PYTHONPATH",
      "ATEN_CPU_CAPABILITY" }) do
      expect.truthy(secrets.allowed(n), n)
    end
    for _, n in ipairs({ "OPENAI_API_KEY", "KAGENT_EVAL_API_KEY", "TRITON_TOKEN", "SSH_AUTH_SOCK", "KAGENT_DB", "AWS_PROFILE" }) do
      expect.falsy(secrets.allowed(n), n)
    end
    local env = secrets.worker_env({ KAGENT_EVAL_SPARE = "0", OPENAI_API_KEY = "x", PATH = false })
    expect.eq(env.KAGENT_EVAL_SPARE, "0")
    expect.eq(env.OPENAI_API_KEY, nil)
    expect.eq(env.PATH, nil, "false removes")
    for name in pairs(env) do expect.truthy(secrets.allowed(name), name) end
  end)

  it("redacts the value of a registered variable in text and in tables", function()
    local path = assert(os.getenv("PATH"))  -- a long value every environment has stands in for a key
    expect.eq(secrets.redact("at " .. path), "at " .. path, "not a secret before it is named")
    secrets.add_name("PATH")
    expect.eq(secrets.redact("at " .. path .. "/x and " .. path), "at [redacted PATH]/x and [redacted PATH]")
    local t = secrets.redact_tree({ error = "in " .. path, nested = { path, 3 }, [path] = true })
    expect.eq(t.error, "in [redacted PATH]")
    expect.eq(t.nested[1], "[redacted PATH]")
    expect.eq(t.nested[2], 3)
    expect.eq(t["[redacted PATH]"], true)
    expect.eq(t[path], nil)
  end)
end)

describe("kagent-rt", function()
  it("is not dumpable: a process of its own user cannot read its environment", function()
    local dir = spec.tmpdir("dumpable")
    fs.write(dir .. "/t.lua", [[
      local r = kagent.proc.run({ "sh", "-c", "cat /proc/$PPID/environ" })
      print(r.code, r.stderr)
    ]])
    local argv = { spec.build_dir .. "/kagent-rt", dir .. "/t.lua" }
    local id = proc.run({ "id", "-u" })
    if id and id.stdout == "0\n" then  -- root reads anything: run both as nobody instead
      proc.run({ "chmod", "755", dir })
      argv = { "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", argv[1], argv[2] }
    end
    local r = assert(proc.run(argv, { env = { SOME_API_KEY = fake_key("dump") }, timeout = 60 }))
    proc.run({ "rm", "-rf", dir })
    expect.eq(r.code, 0, r.stderr)
    expect.match(r.stdout, "^1%s.*Permission denied")
  end)
end)

describe("kagent.gpu with keys in the runtime's environment", function()
  it("keeps them out of results, logs and the worker's log", function()
    local r = proc.run({ spec.python, "-c", "import torch" }, { timeout = 60 })
    if not (r and r.code == 0) then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("secrets")
    local k1, k2 = fake_key("openai"), fake_key("service")
    fs.write(dir .. "/.env", "SERVICE_TOKEN=" .. k2 .. "\nKAGENT_EVAL_TEST_ECHO_B=" .. k2 .. "\n")
    fs.mkdir_p(dir .. "/workers")
    fs.write(dir .. "/job.lua", [[
      local a = kagent.args
      local pool = kagent.gpu.pool({ devices = "cpu", python = a[1], log_dir = a[4], timeout = 120 })
      local r = pool:verify({ problem = a[2], candidate = a[3] })
      kagent.log.warn("a log line with the key: %s", os.getenv("OPENAI_API_KEY"))
      pool:close()
      kagent.task.sleep(0.5)
      print(kagent.json.encode(r))
    ]])
    local fix = spec.root .. "/tests/fixtures/"
    local run = assert(proc.run({ spec.build_dir .. "/kagent-rt", "--env-file", dir .. "/.env", "--log-file", dir .. "/run.log",
      dir .. "/job.lua", spec.python, fix .. "eval/relu_problem.py", fix .. "adversarial/cpu_secret_echo.py", dir .. "/workers" },
      { env = { OPENAI_API_KEY = k1, KAGENT_EVAL_TEST_ECHO_A = k1 }, timeout = 300 }))
    expect.eq(run.code, 0, run.stderr)
    local res = json.decode(run.stdout)
    expect.match(res.error, "^ELOAD: RuntimeError: candidate error: ")
    expect.match(res.error, "KAGENT_EVAL_TEST_ECHO_A=%[redacted OPENAI_API_KEY%]")
    expect.match(res.error, "KAGENT_EVAL_TEST_ECHO_B=%[redacted SERVICE_TOKEN%]", "a secret from .env")
    local worker_log = assert(fs.read(dir .. "/workers/worker-cpu-1.log"))
    expect.match(worker_log, "candidate stderr: KAGENT_EVAL_TEST_ECHO_A=%[redacted OPENAI_API_KEY%]")
    local texts = { stdout = run.stdout, stderr = run.stderr, ["run.log"] = assert(fs.read(dir .. "/run.log")),
      ["worker log"] = worker_log }
    expect.match(texts["run.log"], "a log line with the key: %[redacted OPENAI_API_KEY%]")
    for where, text in pairs(texts) do
      expect.falsy(text:find(k1, 1, true), "the key from the environment in the " .. where)
      expect.falsy(text:find(k2, 1, true), "the key from .env in the " .. where)
    end
    proc.run({ "rm", "-rf", dir })
  end, { timeout = 400 })
end)
