-- kagent.llm against the fake provider server (tests/fixtures/fake_llm: a fake that speaks real
-- HTTP on loopback). Each case runs a fresh kagent-rt with its own environment (keys, base
-- URLs), so what reads the environment is tested as users meet it.
local fake = dofile(kagent.root .. "/tests/fixtures/fake_llm/fake.lua")

local SECRET = "sk-ant-test-SECRET-0123456789abcdef"
local h = fake.cases{ python = spec.python, key = SECRET }
local run = h.run

local function anthropic_env(extra) return h.env("anthropic", extra) end
local function with_server(script) h.server(script) end

describe("llm.chat", function()
  it("calls Anthropic with the key, caches the shared prefix and accounts usage", function()
    with_server{ replies = { { match = "kernel", text = "```python\nprint(2)\n```" } } }
    local out = run([[
      local llm = kagent.llm
      local res = {}
      for i = 1, 2 do
        local r, err = llm.chat{ system = "You optimize GPU kernels. " .. string.rep("rules ", 200),
          messages = { { role = "user", content = "the kernel", cache = true },
                       { role = "user", content = "worker " .. i } }, max_tokens = 123 }
        assert(r, err)
        res[i] = r
      end
      print(kagent.json.encode({ r = res, usage = llm.usage(), ok = {llm.configured()} }))
    ]])
    local st = h.srv:stats(true)
    expect.eq(out.r[1].text, "```python\nprint(2)\n```")
    expect.eq(out.r[1].provider, "anthropic")
    expect.eq(out.r[1].model, "claude-sonnet-4-5")
    expect.eq(out.r[1].attempts, 1)
    expect.eq(out.r[1].cached, false)
    expect.truthy(out.r[1].usage.cache_write_tokens > 0, "first call writes the cache")
    expect.truthy(out.r[2].usage.cache_read_tokens > 0, "second call reads the cache")
    expect.truthy(out.r[1].cost_usd > 0, "cost")
    expect.eq(out.ok[1], true)
    expect.eq(out.ok[2], "anthropic:claude-sonnet-4-5")
    -- Request shape: max_tokens as given, cache_control on the system prompt and marked message.
    local body = st.bodies[1]
    expect.eq(body.max_tokens, 123)
    expect.eq(body.system[1].cache_control.type, "ephemeral")
    expect.eq(body.messages[1].content[1].cache_control.type, "ephemeral")
    expect.eq(body.messages[2].content[1].cache_control, nil)
    -- Run totals are the sums of what the server reported.
    for _, k in ipairs({ "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens" }) do
      expect.eq(out.usage[k], st.usage[k], k)
    end
    expect.eq(out.usage.calls, 2)
  end)

  it("speaks OpenAI-compatible servers by base URL, with reasoning parameters", function()
    with_server{ replies = { { text = "compat ok" } } }
    local out = run([[
      local a = assert(kagent.llm.chat{ messages = { { role = "user", content = "hi" } }, max_tokens = 50,
                                        temperature = 0.2 })
      local b = assert(kagent.llm.chat{ model = "openai:o4-mini", reasoning_effort = "high",
                                        messages = { { role = "user", content = "think" } }, max_tokens = 60 })
      print(kagent.json.encode({ a = a, b = b, u = kagent.llm.usage() }))
    ]], { OPENAI_API_KEY = "sk-openai-test", KAGENT_LLM_URL = h.srv.url .. "/v1", KAGENT_MODEL = "qwen2.5:7b" })
    local st = h.srv:stats(true)
    expect.eq(out.a.text, "compat ok")
    expect.eq(out.a.provider, "openai")
    expect.eq(out.a.model, "qwen2.5:7b")
    expect.eq(st.bodies[1].model, "qwen2.5:7b")
    expect.eq(st.bodies[1].max_tokens, 50)
    expect.eq(st.bodies[1].temperature, 0.2)
    expect.eq(st.bodies[2].max_completion_tokens, 60)
    expect.eq(st.bodies[2].max_tokens, nil)
    expect.eq(st.bodies[2].reasoning_effort, "high")
    expect.eq(out.u.input_tokens + out.u.cache_read_tokens, st.usage.input_tokens + st.usage.cache_read_tokens)
    expect.eq(out.u.output_tokens, st.usage.output_tokens)
  end)

  it("retries a 429 after its Retry-After and then succeeds", function()
    with_server{ replies = { { status = 429, headers = { ["Retry-After"] = "1" }, times = 1 }, { text = "after" } } }
    local out = run([[
      local t0 = kagent.time.now()
      local r, err = kagent.llm.chat{ messages = { { role = "user", content = "x" } } }
      print(kagent.json.encode({ r = r, err = err, dt = kagent.time.now() - t0, u = kagent.llm.usage() }))
    ]])
    expect.eq(out.err, nil)
    expect.eq(out.r.text, "after")
    expect.eq(out.r.attempts, 2)
    expect.eq(out.u.retries, 1)
    expect.truthy(out.dt >= 0.95 and out.dt < 2.0, "retried after about 1 s, took " .. out.dt)
  end)

  it("fails a 401 at once, naming the key variable and never the key", function()
    with_server{ replies = { { status = 401, error_message = "invalid x-api-key " .. SECRET } } }
    local out, r = run([[
      local t0 = kagent.time.now()
      local res, err, code = kagent.llm.chat{ messages = { { role = "user", content = "x" } } }
      kagent.log.info("chat failed: %s", tostring(err))
      print(kagent.json.encode({ err = err, code = code, dt = kagent.time.now() - t0 }))
    ]])
    expect.eq(out.code, "EAUTH")
    expect.match(out.err, "ANTHROPIC_API_KEY")
    expect.no_match(out.err, SECRET)
    expect.no_match(r.log, SECRET, "log")
    expect.no_match(r.stdout .. r.stderr, SECRET, "output")
    expect.lt(out.dt, 0.5)
    expect.eq(h.srv:stats().total_requests, 1)
  end)

  it("maps bad replies and statuses to EPARSE, EBADREQ, ENOTFOUND, ERATELIMIT without crashing", function()
    with_server{ replies = {
      { match = "trunc", fault = "truncate" }, { match = "badjson", fault = "invalid_json" },
      { match = "html", fault = "wrong_content_type" }, { match = "bad400", status = 400 },
      { match = "nf404", status = 404 }, { match = "flaky", status = 500, times = 2 },
      { match = "flaky", text = "recovered" }, { match = "busy", status = 529 },
      { match = "closed", fault = "close" } } }
    local out = run([[
      kagent.llm.configure{ stream = false, backoff = { base = 0.05, max = 0.1 }, retries = 3 }
      local out = {}
      for _, w in ipairs({ "trunc", "badjson", "html", "bad400", "nf404", "flaky", "busy", "closed" }) do
        local r, err, code = kagent.llm.chat{ messages = { { role = "user", content = w } } }
        out[w] = { code = code, err = err, text = r and r.text, attempts = r and r.attempts }
      end
      print(kagent.json.encode(out))
    ]])
    expect.eq(out.trunc.code, "EPARSE")
    expect.eq(out.badjson.code, "EPARSE")
    expect.eq(out.html.code, "EPARSE")
    expect.match(out.html.err, "text/html")
    expect.eq(out.bad400.code, "EBADREQ")
    expect.eq(out.nf404.code, "ENOTFOUND")
    expect.match(out.nf404.err, "claude%-sonnet%-4%-5")
    expect.eq(out.flaky.text, "recovered")
    expect.eq(out.flaky.attempts, 3)
    expect.eq(out.busy.code, "ERATELIMIT")
    expect.eq(out.closed.code, "EHTTP")
    local seen = {}
    for _, t in ipairs(h.srv:stats(true).texts) do seen[t] = (seen[t] or 0) + 1 end
    -- Not retried: parse faults, 400, 404. Retried: 500 (twice, then a reply), 529 (1 + 3 retries).
    for _, w in ipairs({ "trunc", "badjson", "html", "bad400", "nf404" }) do expect.eq(seen[w], 1, w) end
    expect.eq(seen.flaky, 3)
    expect.eq(seen.busy, 4)
    -- curl itself resends once when a reused connection dies before any reply, so >= 4 here.
    expect.truthy(seen.closed >= 4, "closed attempts " .. tostring(seen.closed))
  end)

  it("says which variables to set when nothing is configured", function()
    local out = run([[
      local ok, why = kagent.llm.configured()
      local r, err, code = kagent.llm.chat{ messages = { { role = "user", content = "x" } } }
      print(kagent.json.encode({ ok = ok, why = why, err = err, code = code }))
    ]], {})
    expect.eq(out.ok, false)
    expect.match(out.why, "ANTHROPIC_API_KEY")
    expect.eq(out.code, "ENOTSUP")
    expect.match(out.err, "OPENAI_API_KEY")
    local out2 = run([[
      local r, err, code = kagent.llm.chat{ messages = { { role = "user", content = "x" } } }
      print(kagent.json.encode({ err = err, code = code }))
    ]], { KAGENT_MODEL = "anthropic:claude-haiku-4-5" })
    expect.eq(out2.code, "EAUTH")
    expect.match(out2.err, "ANTHROPIC_API_KEY is not set")
  end)

  it("stops new calls with EBUDGET once a budget is spent", function()
    with_server{ replies = { { text = "t", usage = { input_tokens = 600, output_tokens = 500 } } } }
    local out = run([[
      kagent.llm.configure{ budget = { max_tokens = 2000 } }
      local codes = {}
      for i = 1, 3 do
        local r, err, code = kagent.llm.chat{ messages = { { role = "user", content = "x" .. i } } }
        codes[i] = code or "ok"
      end
      kagent.llm.configure{ budget = { max_tokens = 1e12, max_usd = 0.001 } }
      local _, _, c4 = kagent.llm.chat{ messages = { { role = "user", content = "x4" } } }
      codes[4] = c4 or "ok"
      print(kagent.json.encode({ codes = codes, u = kagent.llm.usage() }))
    ]])
    expect.same(out.codes, { "ok", "ok", "EBUDGET", "EBUDGET" })
    expect.eq(h.srv:stats().total_requests, 2)
    expect.eq(out.u.input_tokens, 1200)
  end)

  it("counts a usage table's tokens with one formula: input, output, cache reads and writes", function()
    expect.eq(kagent.llm.total_tokens({ input_tokens = 1, output_tokens = 20, cache_read_tokens = 300,
      cache_write_tokens = 4000 }), 4321)
    expect.eq(kagent.llm.total_tokens({ input_tokens = 5 }), 5, "a field missing counts 0")
  end)

  it("limits concurrent requests per provider and runs 200 calls at once", function()
    with_server{ latency = 1.0 }
    local out = run([[
      local task = kagent.task
      local function burst(n)
        local fns = {}
        for i = 1, n do fns[i] = function() return assert(kagent.llm.chat{ messages = { { role = "user", content = "c" .. i } } }) end end
        local t0 = kagent.time.now()
        local rs = task.all(fns)
        for _, r in ipairs(rs) do assert(r.ok, r[1]) end
        return kagent.time.now() - t0
      end
      local wide = burst(200)
      kagent.llm.configure{ concurrency = 5 }
      local narrow = burst(10)
      print(kagent.json.encode({ wide = wide, narrow = narrow, u = kagent.llm.usage() }))
    ]], anthropic_env(), { timeout = 60 })
    expect.lt(out.wide, 3.0, "200 concurrent calls with 1 s latency")
    expect.truthy(out.narrow >= 1.9, "10 calls through 5 slots take two rounds, took " .. out.narrow)
    local st = h.srv:stats()
    expect.eq(st.total_requests, 210)
    expect.eq(out.u.calls, 210)
    expect.eq(out.u.input_tokens, st.usage.input_tokens)
    expect.eq(out.u.output_tokens, st.usage.output_tokens)
  end, { timeout = 90 })

  it("aborts the transfer and frees the slot when the calling task is killed", function()
    with_server{ latency = 5.0 }
    local out = run([[
      local task = kagent.task
      kagent.llm.configure{ concurrency = 1 }
      local t = task.spawn(function() return kagent.llm.chat{ messages = { { role = "user", content = "slow" } } } end)
      task.sleep(0.3)
      task.kill(t)
      local st = kagent.http.stats()
      -- The slot came back: a call with a short timeout gets through at once (and times out).
      local t0 = kagent.time.now()
      local r, err, code = kagent.llm.chat{ messages = { { role = "user", content = "next" } }, timeout = 0.2, retries = 0 }
      print(kagent.json.encode({ canceled = st.canceled, in_flight = st.in_flight, code = code, dt = kagent.time.now() - t0 }))
    ]])
    expect.eq(out.canceled, 1)
    expect.eq(out.in_flight, 0)
    expect.eq(out.code, "ETIMEDOUT")
    expect.lt(out.dt, 3.0, "did not wait for the killed call's 5 s reply")
  end)
end)

describe("llm record/replay", function()
  it("replays a recorded run with the same outputs and no HTTP request", function()
    local ok_mem, mem = pcall(require, "kagent.mem")
    if not ok_mem or type(mem) ~= "table" or not mem.open then skip("kagent.mem is not available") end
    with_server{ replies = { { match = "a question", text = "reply A" }, { match = "same", text = "first", times = 1 },
                             { match = "same", text = "second" }, { text = "reply B" } } }
    local dir = spec.tmpdir("llm-replay")
    local db = dir .. "/llm.db"
    local body = [[
      local out = {}
      for _, q in ipairs({ "a question", "b question", "same", "same" }) do
        local r, err, code = kagent.llm.chat{ system = "sys", messages = { { role = "user", content = q } } }
        out[#out + 1] = r and { text = r.text, cached = r.cached, usage = r.usage } or { code = code, err = err }
      end
      print(kagent.json.encode({ out = out, http = kagent.http.stats().started, u = kagent.llm.usage() }))
    ]]
    local rec, rec_run = run(body, anthropic_env({ KAGENT_LLM_CACHE = "record", KAGENT_LLM_DB = db }))
    expect.no_match(rec_run.log .. rec_run.stdout .. rec_run.stderr, SECRET, "record run output")
    expect.eq(rec.out[1].text, "reply A")
    expect.eq(rec.http, 4)
    expect.eq(rec.out[3].text, "first")
    expect.eq(rec.out[4].text, "second")
    h.srv:reset()
    local rep = run(body, anthropic_env({ KAGENT_LLM_CACHE = "replay", KAGENT_LLM_DB = db }))
    expect.eq(rep.http, 0, "HTTP requests during replay")
    expect.eq(h.srv:stats().total_requests, 0)
    for i = 1, 4 do
      expect.eq(rep.out[i].text, rec.out[i].text)
      expect.eq(rep.out[i].cached, true)
      expect.same(rep.out[i].usage, rec.out[i].usage)
    end
    expect.eq(rep.u.replayed, 4)
    expect.eq(rep.u.input_tokens, rec.u.input_tokens)
    -- A request that was never recorded fails in replay mode.
    local miss = run([[
      local r, err, code = kagent.llm.chat{ messages = { { role = "user", content = "never asked" } } }
      print(kagent.json.encode({ code = code }))
    ]], anthropic_env({ KAGENT_LLM_CACHE = "replay", KAGENT_LLM_DB = db }))
    expect.eq(miss.code, "EREPLAY")
    -- The key is in neither the database nor the logs.
    local f = assert(io.open(db, "rb"))
    local bytes = f:read("*a")
    f:close()
    for _, side in ipairs({ "-wal", "-shm" }) do
      local g = io.open(db .. side, "rb")
      if g then bytes = bytes .. g:read("*a") g:close() end
    end
    expect.truthy(bytes:find("reply A", 1, true), "the database holds the replies")
    expect.no_match(bytes, SECRET, "database")
  end)
end)

describe("llm record/replay with a replay_key", function()
  it("keys a call on its replay_key instead of its body, counts misses, and replays with no API key", function()
    with_server{ replies = { { text = "keyed reply" } } }
    local db = spec.tmpdir("llm-replay-key") .. "/llm.db"
    local function ask(content, key)
      return string.format([[
        local r, err, code = kagent.llm.chat{ system = "sys", messages = { { role = "user", content = %q } }, replay_key = %q }
        print(kagent.json.encode({ text = r and r.text, code = code, http = kagent.http.stats().started,
          u = kagent.llm.usage(), mode = kagent.llm.cache_mode() }))
      ]], content, key)
    end
    local rec = run(ask("measured 1.23 ms", "place A"), anthropic_env({ KAGENT_LLM_CACHE = "record", KAGENT_LLM_DB = db }))
    expect.eq(rec.text, "keyed reply")
    expect.eq(rec.mode, "record")
    h.srv:reset()
    -- another body (a fresh measurement) at the same key is the same question; no key is needed
    local replay_env = anthropic_env({ KAGENT_LLM_CACHE = "replay", KAGENT_LLM_DB = db, ANTHROPIC_API_KEY = false })
    local rep = run(ask("measured 9.87 ms", "place A"), replay_env)
    expect.eq(rep.text, "keyed reply")
    expect.eq(rep.http, 0, "HTTP requests during replay")
    expect.eq(rep.u.replayed, 1)
    local miss = run(ask("measured 1.23 ms", "place B"), replay_env)
    expect.eq(miss.code, "EREPLAY", "the same body at another key is not in the record")
    expect.eq(miss.u.replay_misses, 1)
    expect.eq(h.srv:stats().total_requests, 0, "nothing reached the server")
  end)
end)

describe("llm teardown", function()
  after_all(function() h.stop() end)
end)
