-- kagent.http against the fake LLM server (tests/fixtures/fake_llm, a fake on loopback).
local fake = dofile(kagent.root .. "/tests/fixtures/fake_llm/fake.lua")
local http, task = kagent.http, kagent.task
local srv

local function server(script)
  if not srv then srv = fake.start{ python = spec.python } end
  srv:set_script(script or {})
  return srv
end

local function post(path, body, headers, opts)
  local req = { method = "POST", url = srv.url .. path, body = body, headers = headers }
  for k, v in pairs(opts or {}) do req[k] = v end
  return http.request(req)
end

local AUTH = { authorization = "Bearer k", ["content-type"] = "application/json" }
local BODY = '{"model":"m","messages":[{"role":"user","content":"hello"}]}'

describe("http.request", function()
  it("returns status, lower-cased headers, body and elapsed", function()
    server()
    local r = assert(http.request{ url = srv.url .. "/_stats" })
    expect.eq(r.status, 200)
    expect.eq(r.headers["content-type"], "application/json")
    expect.truthy(kagent.json.decode(r.body).requests, "body is the stats JSON")
    expect.truthy(r.elapsed > 0 and r.elapsed < 5, "elapsed")
    local c = assert(post("/v1/chat/completions", BODY, AUTH))
    expect.eq(c.status, 200)
    expect.match(c.body, "chat.completion")
  end)

  it("returns 4xx and 5xx as results", function()
    server{ replies = { { status = 503 } } }
    local r = assert(post("/v1/chat/completions", BODY, { authorization = "Bearer bad" }))
    expect.eq(r.status, 401)
    local r2 = assert(post("/v1/chat/completions", BODY, AUTH))
    expect.eq(r2.status, 503)
  end)

  it("keeps many transfers in flight from one thread", function()
    server{ latency = 0.5 }
    local fns = {}
    for i = 1, 100 do fns[i] = function() return assert(post("/v1/chat/completions", BODY, AUTH)).status end end
    local t0 = kagent.time.now()
    local rs = task.all(fns)
    local dt = kagent.time.now() - t0
    for _, r in ipairs(rs) do expect.eq(r[1], 200) end
    expect.lt(dt, 10.0, "100 requests of 0.5 s each, not one after another (50 s)")
    expect.truthy(srv:stats().max_concurrency >= 50, "server saw them at once")
  end)

  it("fails with ETIMEDOUT, ECONNECT, EHTTP and ETOOBIG", function()
    server{ replies = { { match = "slow", delay = 3 }, { match = "closed", fault = "close" } } }
    local r, err, code = post("/v1/chat/completions", BODY:gsub("hello", "slow"), AUTH, { timeout = 0.3 })
    expect.eq(r, nil)
    expect.eq(code, "ETIMEDOUT")
    expect.match(err, "^ETIMEDOUT: ")
    r, err, code = http.request{ url = "http://127.0.0.1:1/x?key=SECRETQ" }
    expect.eq(code, "ECONNECT")
    expect.no_match(err, "SECRETQ", "the query string stays out of messages")
    r, err, code = post("/v1/chat/completions", BODY:gsub("hello", "closed"), AUTH)
    expect.eq(code, "EHTTP")
    -- a body over max_body has a code of its own: it is never worth asking again
    r, err, code = http.request{ url = srv.url .. "/_stats", max_body = 10 }
    expect.eq(code, "ETOOBIG")
    expect.match(err, "max_body")
  end)

  it("aborts the transfer when its task is killed", function()
    server{ latency = 3 }
    local before = http.stats()
    local t = task.spawn(function() return post("/v1/chat/completions", BODY, AUTH) end)
    task.sleep(0.3)
    expect.eq(http.stats().in_flight, 1)
    task.kill(t)
    local after = http.stats()
    expect.eq(after.in_flight, 0)
    expect.eq(after.canceled, before.canceled + 1)
    local ok, err = task.wait(t)
    expect.eq(ok, false)
    expect.match(err, "ECANCELED")
  end)

  it("ends a stalled transfer with ETIMEDOUT after its idle timeout, saying what stalled", function()
    server{ replies = { { match = "hang", fault = "hang" } } }
    local t0 = kagent.time.now()
    local r, err, code = post("/v1/chat/completions", BODY:gsub("hello", "hang"), AUTH, { idle_timeout = 0.3 })
    local dt = kagent.time.now() - t0
    expect.eq(r, nil)
    expect.eq(code, "ETIMEDOUT")
    expect.match(err, "accepted the request but sent no reply for 0%.3 s %(idle timeout%)")
    expect.truthy(dt >= 0.29 and dt < 1.0, "idle timeout took " .. dt)
    -- A slow reply that keeps sending is not a stall.
    server{ replies = { { chunk_delay = 0.15, text = string.rep("abcd", 8) } } }
    local streamed = BODY:gsub('"messages"', '"stream":true,"messages"')
    local ok = assert(post("/v1/chat/completions", streamed, AUTH, { idle_timeout = 0.4 }))
    expect.eq(ok.status, 200)
    expect.match(ok.body, "%[DONE%]")
  end)

  it("raises on misuse", function()
    expect.errors(function() http.request("http://x") end, "expected a table")
    expect.errors(function() http.request{ url = "ftp://x" } end, "http://")
    expect.errors(function() http.request{ url = "http://x", method = "BREW" } end, "unsupported method")
  end)
end)

describe("http.stream", function()
  local STREAMED = BODY:gsub('"messages"', '"stream":true,"messages"')

  it("hands over the body in pieces as they arrive, after the status and headers", function()
    server{ replies = { { chunk_delay = 0.25, text = string.rep("abcd", 5) } } }
    local t0 = kagent.time.now()
    local s = assert(http.stream{ method = "POST", url = srv.url .. "/v1/chat/completions", headers = AUTH,
                                  body = STREAMED })
    expect.eq(s.status, 200)
    expect.eq(s.headers["content-type"], "text/event-stream")
    expect.lt(kagent.time.now() - t0, 0.8, "the head came before the body (1.25 s of it)")
    local pieces, times = {}, {}
    while true do
      local chunk, err = s:read()
      if not chunk then
        expect.eq(err, nil)
        break
      end
      pieces[#pieces + 1] = chunk
      times[#times + 1] = kagent.time.now() - t0
    end
    local body = table.concat(pieces)
    expect.match(body, "%[DONE%]")
    expect.truthy(#pieces >= 4, "arrived in pieces: " .. #pieces)
    expect.truthy(times[#times] - times[1] >= 0.3, "spread over the stream's time")
    expect.eq(s:read(), nil, "reading after the end stays at the end")
  end)

  it("returns error statuses with their body, and transport failures as codes", function()
    server{ replies = { { status = 503, error_message = "warming up" }, } }
    local s = assert(http.stream{ method = "POST", url = srv.url .. "/v1/chat/completions", headers = AUTH,
                                  body = STREAMED })
    expect.eq(s.status, 503)
    expect.match(assert(s:body()), "warming up")
    local r, err, code = http.stream{ url = "http://127.0.0.1:1/x" }
    expect.eq(r, nil)
    expect.eq(code, "ECONNECT")
    server{ replies = { { fault = "stall", text = string.rep("abcd", 8) } } }
    local st = assert(http.stream{ method = "POST", url = srv.url .. "/v1/chat/completions", headers = AUTH,
                                   body = STREAMED, idle_timeout = 0.3 })
    local body, serr, scode = st:body()
    expect.eq(body, nil)
    expect.eq(scode, "ETIMEDOUT")
    expect.match(serr, "the reply stalled: no data for 0%.3 s after %d+ body bytes")
  end)

  it("aborts the transfer when the reading task is killed or the stream closed", function()
    server{ replies = { { chunk_delay = 0.3, text = string.rep("abcd", 10) } } }
    local before = http.stats()
    local t = task.spawn(function()
      local s = assert(http.stream{ method = "POST", url = srv.url .. "/v1/chat/completions", headers = AUTH,
                                    body = STREAMED })
      return s:body()
    end)
    task.sleep(0.4)
    expect.eq(http.stats().in_flight, 1)
    task.kill(t)
    expect.eq(http.stats().in_flight, 0)
    local s = assert(http.stream{ method = "POST", url = srv.url .. "/v1/chat/completions", headers = AUTH,
                                  body = STREAMED })
    assert(s:read())
    s:close()
    local after = http.stats()
    expect.eq(after.in_flight, 0)
    expect.eq(after.canceled, before.canceled + 2)
    expect.eq(s:read(), nil)
  end)

  it("raises on misuse", function()
    expect.errors(function() http.stream{ url = "ftp://x" } end, "http://")
    expect.errors(function() http.stream{ url = "http://x", idle_timeout = "soon" } end, "idle_timeout must be a number")
  end)
end)

describe("http teardown", function()
  after_all(function() if srv then srv:stop() end end)
end)
