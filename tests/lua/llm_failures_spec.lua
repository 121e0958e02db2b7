-- kagent.llm when the server misbehaves: stalls, timeouts, huge Retry-After, error texts, and
-- what a failed call returns (its code, status and the server's words, never the API key).
-- Against the fake provider server (tests/fixtures/fake_llm, a fake on loopback); each case runs
-- a fresh kagent-rt with its own environment, as users meet it.
local fake = dofile(kagent.root .. "/tests/fixtures/fake_llm/fake.lua")

local SECRET = "sk-ant-test-SECRET-0123456789abcdef"
local OPENAI_SECRET = "sk-proj-test-OTHERSECRET-987654"
local h = fake.cases{ python = spec.python, key = SECRET }
local run, server = h.run, h.server

local function anthropic_env(extra) return h.env("anthropic", extra) end

-- Lines of the log at warn level that mention `what`.
local function warnings(log, what)
  local out = {}
  for line in log:gmatch("[^\n]+") do
    if line:find("warn", 1, true) and line:find(what, 1, true) then out[#out + 1] = line end
  end
  return out
end

local CHAT = [[
  local t0 = kagent.time.now()
  local r, err, code, info = kagent.llm.chat{ messages = { { role = "user", content = %q } } }
  print(kagent.json.encode({ r = r, err = err, code = code, info = info, dt = kagent.time.now() - t0,
                             u = kagent.llm.usage() }))
]]

describe("llm timeouts", function()
  it("reports a server that accepts and never answers as ETIMEDOUT, logging each retry", function()
    server{ replies = { { match = "hang", fault = "hang" } } }
    local out, r = run([[
      kagent.llm.configure{ stream = false, idle_timeout = 0.3, retries = 2, backoff = { base = 0.05, max = 0.1 } }
    ]] .. CHAT:format("hang"))
    expect.eq(out.code, "ETIMEDOUT")
    expect.match(out.err, "^ETIMEDOUT: the server accepted the request but sent no reply for 0%.3 s %(idle timeout%)")
    expect.match(out.err, "gave up after 3 attempts")
    expect.eq(out.info.attempts, 3)
    expect.eq(out.info.retryable, true)
    expect.lt(out.dt, 2.0, "three stalled attempts of 0.3 s")
    expect.truthy(out.dt >= 0.9, "each attempt waited its idle timeout, took " .. out.dt)
    local retry_lines = warnings(r.log, "idle timeout")
    expect.eq(#retry_lines, 3, "two retries and the final give-up are logged:\n" .. r.log)
    expect.match(retry_lines[1], "retry 1/2 in [%d.]+ s")
    expect.match(retry_lines[2], "retry 2/2 in [%d.]+ s")
    expect.eq(out.u.failures_by_code.ETIMEDOUT, 1)
    local st = h.srv:stats()
    expect.eq(st.requests["/v1/messages"], 3)
    expect.eq(st.in_flight, 0, "the client hung up each stalled request")
  end)

  it("bounds the whole call, retries and waits included, by its total timeout", function()
    server{ replies = { { match = "hang", fault = "hang" } } }
    local out = run([[
      kagent.llm.configure{ stream = false, timeout = 0.8, idle_timeout = 0.3, retries = 20, backoff = { base = 0.05, max = 0.1 } }
    ]] .. CHAT:format("hang"))
    expect.eq(out.code, "ETIMEDOUT")
    -- without the total, 21 attempts of 0.3 s and their waits would take over 6 s
    expect.lt(out.dt, 3.0, "the 0.8 s total held")
    expect.match(out.err, "0%.8 s timeout")
    expect.truthy(out.info.attempts < 7, "the total cut the attempts short: " .. out.info.attempts)
  end)

  it("takes timeouts per call and from KAGENT_LLM_TIMEOUT", function()
    server{ replies = { { match = "hang", fault = "hang" } } }
    local out = run([[
      local t0 = kagent.time.now()
      local _, err, code = kagent.llm.chat{ messages = { { role = "user", content = "hang" } }, timeout = 0.4,
                                            idle_timeout = 0.2, retries = 0 }
      print(kagent.json.encode({ err = err, code = code, dt = kagent.time.now() - t0 }))
    ]])
    expect.eq(out.code, "ETIMEDOUT")
    expect.match(out.err, "no reply for 0%.2 s")
    expect.lt(out.dt, 0.6)
    local env_out = run(CHAT:format("hang"), anthropic_env({ KAGENT_LLM_TIMEOUT = "total=0.5s, idle=0.25" }))
    expect.eq(env_out.code, "ETIMEDOUT")
    expect.match(env_out.err, "no reply for 0%.25 s")
    expect.lt(env_out.dt, 0.8, "KAGENT_LLM_TIMEOUT's total held")
    -- A configure{} value wins over the environment.
    local both = run([[ kagent.llm.configure{ timeout = "idle=0.15,total=0.3" } ]] .. CHAT:format("hang"),
      anthropic_env({ KAGENT_LLM_TIMEOUT = "total=5,idle=2" }))
    expect.match(both.err, "no reply for 0%.15 s")
    expect.lt(both.dt, 0.6)
  end)

  it("refuses an unreadable KAGENT_LLM_TIMEOUT with the expected form", function()
    local out = run([[
      local ok, why = kagent.llm.configured()
      local _, err, code = kagent.llm.chat{ messages = { { role = "user", content = "x" } } }
      print(kagent.json.encode({ ok = ok, why = why, err = err, code = code }))
    ]], anthropic_env({ KAGENT_LLM_TIMEOUT = "soon" }))
    expect.eq(out.ok, false)
    expect.match(out.why, "KAGENT_LLM_TIMEOUT")
    expect.match(out.why, "total=DUR")
    expect.eq(out.code, "ENOTSUP")
  end)

  it("parses the timeout form", function()
    local parse = kagent.llm.parse_timeout
    expect.same(parse("90"), { timeout = 90 })
    expect.same(parse("10m"), { timeout = 600 })
    expect.same(parse("total=1h, idle=90s,connect=2.5"), { timeout = 3600, idle_timeout = 90, connect_timeout = 2.5 })
    expect.same(parse("IDLE=1.5m"), { idle_timeout = 90 })
    for _, bad in ipairs({ "", "0", "-5", "ten", "idle=", "idle=0", "wait=3", "total=1,total=2", "5 parsecs", "1,2" }) do
      local v, why = parse(bad)
      expect.eq(v, nil, "'" .. bad .. "' is refused")
      expect.match(why, "DUR", "the message shows the form")
    end
    expect.errors(function() kagent.llm.configure{ timeout = "soon" } end, "timeout: bad duration")
    expect.errors(function() kagent.llm.configure{ idle_timeout = 0 } end, "idle_timeout must be")
  end)
end)

describe("llm retries", function()
  it("caps a huge Retry-After at the backoff maximum and says so", function()
    server{ replies = { { status = 429, headers = { ["Retry-After"] = "86400" }, times = 1 }, { text = "after" } } }
    local out, r = run([[ kagent.llm.configure{ backoff = { base = 0.05, max = 0.3 } } ]] .. CHAT:format("x"))
    expect.eq(out.err, nil)
    expect.eq(out.r.text, "after")
    expect.eq(out.r.attempts, 2)
    expect.truthy(out.dt >= 0.28 and out.dt < 1.5, "waited the 0.3 s cap, not a day: " .. out.dt)
    expect.eq(#warnings(r.log, "asked for 86400 s; capped"), 1, r.log)
  end)

  it("seeds the random source per process (KAGENT_SEED fixes it)", function()
    local src = [[ print(kagent.json.encode({ x = math.random(), y = math.random(1, 1e9) })) ]]
    local a, b = run(src, {}), run(src, {})
    expect.ne(a.x, b.x, "two processes draw different numbers")
    local c, d = run(src, { KAGENT_SEED = "42" }), run(src, { KAGENT_SEED = "42" })
    expect.eq(c.x, d.x, "a fixed seed repeats")
    expect.eq(c.y, d.y)
  end)
end)

describe("llm failures", function()
  it("carry the status and the server's own words, from every server shape", function()
    local cases = {
      { flavor = nil, status = 500, msg = "the GPU fell off the bus", code = "EHTTP" },
      { flavor = "vllm", status = 400, msg = "This model's maximum context length is 32768 tokens", code = "EBADREQ" },
      { flavor = "llamacpp", status = 503, msg = "Loading model", code = "EHTTP" },
      { flavor = "openai", status = 429, msg = "Rate limit reached for requests", code = "ERATELIMIT" },
    }
    for _, c in ipairs(cases) do
      server({ replies = { { status = c.status, error_message = c.msg } } }, c.flavor)
      local env = c.flavor and { KAGENT_LLM_URL = h.srv.url .. "/v1", KAGENT_MODEL = "openai:" .. (c.flavor == "vllm"
        and "Qwen/Qwen2.5-Coder-7B-Instruct" or "m"), OPENAI_API_KEY = OPENAI_SECRET } or anthropic_env()
      local out = run([[ kagent.llm.configure{ retries = 1, backoff = { base = 0.01, max = 0.02 } } ]] .. CHAT:format("x"), env)
      local what = (c.flavor or "anthropic") .. " " .. c.status
      expect.eq(out.code, c.code, what)
      expect.eq(out.info.status, c.status, what)
      expect.eq(out.info.server_error, c.msg, what)
      expect.match(out.err, c.msg:gsub("%p", "%%%0"), what)
      expect.match(out.err, "HTTP " .. c.status, what)
    end
  end)

  it("keep a proxy's HTML error page as short text", function()
    server{ replies = { { status = 502, html = true, error_message = "502 Bad Gateway" } } }
    local out = run([[ kagent.llm.configure{ retries = 0 } ]] .. CHAT:format("x"))
    expect.eq(out.code, "EHTTP")
    expect.eq(out.info.status, 502)
    expect.eq(out.info.server_error, "502 502 Bad Gateway nginx")
  end)

  it("never show an API key, even when the server quotes it back", function()
    server{ replies = { { match = "plain", status = 500, echo_auth = true },
                        { match = "mid", fault = "stream_error", echo_auth = true, text = string.rep("abcd", 8) },
                        { match = "four", status = 400, echo_auth = true } } }
    local body = [[
      kagent.llm.configure{ retries = 1, backoff = { base = 0.01, max = 0.02 } }
      local out = {}
      for _, w in ipairs({ "plain", "mid", "four" }) do
        local r, err, code, info = kagent.llm.chat{ messages = { { role = "user", content = w } }, stream = w == "mid" }
        kagent.log.warn("chat %s failed: %s", w, tostring(err))
        out[w] = { err = err, code = code, info = info }
      end
      print(kagent.json.encode(out))
    ]]
    local out, r = run(body)
    expect.eq(out.plain.code, "EHTTP")
    expect.eq(out.four.code, "EBADREQ")
    expect.eq(out.mid.code, "ERATELIMIT", "an overloaded error event mid-stream")
    expect.match(out.plain.info.server_error, "x%-api%-key", "the server did quote the headers")
    expect.match(out.mid.info.server_error, "x%-api%-key", "the error event quoted them too")
    local everything = r.stdout .. r.stderr .. r.log
    expect.no_match(everything, SECRET, "anthropic key")
    -- And an OpenAI-compatible relay that echoes the bearer token.
    server({ replies = { { status = 500, echo_auth = true } } }, "openai")
    local o2, r2 = run(body, { KAGENT_LLM_URL = h.srv.url .. "/v1", KAGENT_MODEL = "openai:m", OPENAI_API_KEY = OPENAI_SECRET })
    expect.match(o2.plain.info.server_error, "Bearer", "the server did quote the headers")
    expect.no_match(r2.stdout .. r2.stderr .. r2.log, OPENAI_SECRET, "openai key")
  end)
end)

describe("llm failures teardown", function()
  after_all(function() h.stop() end)
end)
