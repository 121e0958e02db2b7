-- kagent.llm streaming (server-sent events, decoded by the runtime as they arrive) against the
-- fake provider server (tests/fixtures/fake_llm, a fake on loopback) in its Anthropic, vLLM-style
-- and llama.cpp-style forms. Each case runs a fresh kagent-rt with its own environment.
local fake = dofile(kagent.root .. "/tests/fixtures/fake_llm/fake.lua")

local h = fake.cases{ python = spec.python }
local run, server = h.run, h.server

local function anthropic_env(extra) return h.env("anthropic", extra) end
local function local_env(extra) return h.env("local", extra) end

local STREAM = [[
  local calls = {}
  local t0 = kagent.time.now()
  local r, err, code, info = kagent.llm.chat{ messages = { { role = "user", content = %q } }, stream = %s,
    on_token = function(text, p)
      calls[#calls + 1] = { text = text, attempt = p.attempt, tokens = p.tokens, chars = p.chars,
                            tokens_per_s = p.tokens_per_s, first_token_s = p.first_token_s }
    end }
  print(kagent.json.encode({ r = r, err = err, code = code, info = info, calls = calls, dt = kagent.time.now() - t0,
                             u = kagent.llm.usage(), http = kagent.http.stats() }))
]]

local REPLY = "```python\n" .. string.rep("x = x + 1\n", 12) .. "```"

local function joined(calls, attempt)
  local parts = {}
  for _, c in ipairs(calls) do
    if not attempt or c.attempt == attempt then parts[#parts + 1] = c.text end
  end
  return table.concat(parts)
end

describe("llm streaming", function()
  it("streams Anthropic events to on_token and returns the same result with usage and speed", function()
    server{ chunk_delay = 0.01, replies = { { text = REPLY } } }
    local out = run(STREAM:format("hello", "true"), anthropic_env())
    expect.eq(out.err, nil)
    expect.eq(out.r.text, REPLY)
    expect.eq(joined(out.calls), REPLY, "the tokens add up to the text")
    expect.truthy(#out.calls >= 20, "many deltas, got " .. #out.calls)
    expect.eq(out.r.streamed, true)
    local st = h.srv:stats(true)
    expect.eq(st.bodies[1].stream, true)
    expect.eq(out.r.usage.output_tokens, st.usage.output_tokens)
    expect.eq(out.r.usage.input_tokens, st.usage.input_tokens)
    expect.eq(out.r.usage_estimated, false)
    expect.truthy(out.r.first_token_s > 0 and out.r.first_token_s < out.r.latency, "first_token_s")
    -- 32 deltas 10 ms apart: the decoding rate is the server's, about 100 deltas/s.
    expect.truthy(out.r.tokens_per_s > 10 and out.r.tokens_per_s < 1000, "tokens_per_s " .. out.r.tokens_per_s)
    expect.truthy(out.u.tokens_per_s > 0 and out.u.gen_seconds > 0, "run-level rate")
    expect.eq(out.u.gen_tokens, out.r.usage.output_tokens - 1)
    local last = out.calls[#out.calls]
    expect.eq(last.chars, #REPLY)
    expect.truthy(last.tokens_per_s and last.tokens_per_s > 0, "live rate in the progress table")
  end)

  for _, flavor in ipairs({ "vllm", "llamacpp" }) do
    it("streams " .. flavor .. "-style chunks with the final usage chunk", function()
      server({ chunk_delay = 0.005, replies = { { text = REPLY, usage = { input_tokens = 321, output_tokens = 45 } } } },
        flavor)
      local out = run(STREAM:format("hi", "true"), local_env())
      expect.eq(out.err, nil)
      expect.eq(out.r.text, REPLY)
      expect.eq(joined(out.calls), REPLY)
      expect.eq(out.r.usage.input_tokens, 321, "from the usage chunk")
      expect.eq(out.r.usage.output_tokens, 45, "from the usage chunk")
      expect.eq(out.r.usage_estimated, false)
      expect.eq(out.r.stop_reason, "stop")
      local body = h.srv:stats(true).bodies[1]
      expect.eq(body.stream, true)
      expect.eq(body.stream_options.include_usage, true)
    end)
  end

  it("counts streamed tokens when the server reports no usage", function()
    server({ replies = { { text = REPLY } } }, "llamacpp")
    -- Without stream_options llama.cpp sends no usage chunk; the fake follows it when asked not to.
    local out = run([[
      local r = assert(kagent.llm.chat{ messages = { { role = "user", content = "x" } }, stream = true,
                                        extra = { stream_options = { include_usage = false } } })
      print(kagent.json.encode({ r = r }))
    ]], local_env())
    expect.eq(out.r.text, REPLY)
    expect.eq(out.r.usage_estimated, true)
    expect.eq(out.r.usage.output_tokens, math.ceil(#REPLY / 4), "one per streamed chunk")
  end)

  it("detects a stream that stalls mid-way with the idle timeout, and starts over", function()
    server{ replies = { { fault = "stall", stall_after = 3, text = REPLY, times = 1 }, { text = REPLY } } }
    local out, r = run([[ kagent.llm.configure{ idle_timeout = 0.3, backoff = { base = 0.05, max = 0.1 } } ]]
      .. STREAM:format("x", "true"), anthropic_env())
    expect.eq(out.err, nil)
    expect.eq(out.r.text, REPLY, "the text of the attempt that finished, not both")
    expect.eq(out.r.attempts, 2)
    expect.eq(joined(out.calls, 1), REPLY:sub(1, 12), "attempt 1 streamed three deltas")
    expect.eq(joined(out.calls, 2), REPLY, "attempt 2 started over")
    expect.match(r.log, "the reply stalled: no data for 0%.3 s after %d+ body bytes %(idle timeout%)")
    expect.match(r.log, "retry 1/" .. kagent.llm.DEFAULTS.retries .. " in")
    -- far under any default timeout (a loaded machine stretches it; the bound is not a speed test)
    expect.lt(out.dt, 10)
  end)

  it("reports a stall that does not clear as ETIMEDOUT", function()
    server{ replies = { { fault = "stall", text = REPLY } } }
    local out = run([[ kagent.llm.configure{ idle_timeout = 0.2, retries = 1, backoff = { base = 0.05, max = 0.1 } } ]]
      .. STREAM:format("x", "true"), anthropic_env())
    expect.eq(out.code, "ETIMEDOUT")
    expect.match(out.err, "the reply stalled")
    expect.eq(out.info.attempts, 2)
    expect.eq(h.srv:stats().in_flight, 0, "the stalled streams were hung up")
  end)

  it("calls a stream cut before its end EPARSE, and retries an error event", function()
    server{ replies = { { match = "cut", fault = "stream_cut", text = REPLY },
                        { match = "busy", fault = "stream_error", times = 1, text = REPLY },
                        { match = "busy", text = "recovered" } } }
    local out = run([[
      kagent.llm.configure{ backoff = { base = 0.05, max = 0.1 } }
      local a = { kagent.llm.chat{ messages = { { role = "user", content = "cut" } }, stream = true } }
      local b = { kagent.llm.chat{ messages = { { role = "user", content = "busy" } }, stream = true } }
      print(kagent.json.encode({ cut = { err = a[2], code = a[3] }, busy = b[1] }))
    ]], anthropic_env())
    expect.eq(out.cut.code, "EPARSE")
    expect.match(out.cut.err, "stream ended before the reply did")
    expect.eq(out.busy.text, "recovered")
    expect.eq(out.busy.attempts, 2)
  end)

  it("takes a whole reply from a server that ignores stream", function()
    server{ replies = { { text = REPLY, ignore_stream = true } } }
    local out = run(STREAM:format("x", "true"), anthropic_env())
    expect.eq(out.r.text, REPLY)
    expect.eq(#out.calls, 1)
    expect.eq(out.calls[1].text, REPLY)
  end)

  it("is on by default, off with KAGENT_LLM_STREAM=0, and configure{stream} wins", function()
    server{ replies = { { text = REPLY } } }
    local default = run(STREAM:format("x", "nil"), anthropic_env())
    expect.eq(default.r.streamed, true, "streamed by default (a dead server is told in one start timeout)")
    h.srv:reset()
    local off = run(STREAM:format("x", "nil"), anthropic_env({ KAGENT_LLM_STREAM = "0" }))
    expect.eq(off.r.streamed, false)
    expect.eq(#off.calls, 1, "a whole reply reaches on_token once")
    expect.eq(off.calls[1].text, REPLY)
    expect.eq(h.srv:stats(true).bodies[1].stream, nil)
    local on = run(STREAM:format("x", "nil"), anthropic_env({ KAGENT_LLM_STREAM = "1" }))
    expect.eq(on.r.streamed, true)
    expect.truthy(#on.calls > 1)
    local cfg = run([[ kagent.llm.configure{ stream = true } ]] .. STREAM:format("x", "nil"),
      anthropic_env({ KAGENT_LLM_STREAM = "0" }))
    expect.eq(cfg.r.streamed, true, "configure{} wins over the environment")
    local bad = run(STREAM:format("x", "nil"), anthropic_env({ KAGENT_LLM_STREAM = "maybe" }))
    expect.eq(bad.code, "ENOTSUP")
    expect.match(bad.err, "KAGENT_LLM_STREAM")
  end)

  it("parks the task while it waits for the next chunk (no polling)", function()
    server{ chunk_delay = 0.1, replies = { { text = string.rep("abcd", 10) } } }
    local out = run([[
      local c0 = os.clock()
      local r = assert(kagent.llm.chat{ messages = { { role = "user", content = "x" } }, stream = true })
      print(kagent.json.encode({ cpu = os.clock() - c0, latency = r.latency }))
    ]], anthropic_env())
    expect.truthy(out.latency >= 0.9, "ten deltas 0.1 s apart, took " .. out.latency)
    -- polling every few milliseconds would burn most of the second; parking burns almost none
    expect.lt(out.cpu, 0.4, "CPU seconds while waiting about a second for chunks")
  end)

  it("aborts the stream and frees the slot when the calling task is killed", function()
    server{ replies = { { match = "long", chunk_delay = 0.2, text = string.rep("abcd", 20) }, { text = "next ok" } } }
    local out = run([[
      local task = kagent.task
      kagent.llm.configure{ concurrency = 1 }
      local seen = 0
      local t = task.spawn(function()
        return kagent.llm.chat{ messages = { { role = "user", content = "long" } }, stream = true,
                                on_token = function() seen = seen + 1 end }
      end)
      task.sleep(0.5)
      task.kill(t)
      local st = kagent.http.stats()
      -- The slot came back: the next call gets through at once (else it would wait out its timeout).
      local r, err = kagent.llm.chat{ messages = { { role = "user", content = "next" } }, timeout = 0.5,
                                      retries = 0, stream = true }
      print(kagent.json.encode({ seen = seen, canceled = st.canceled, in_flight = st.in_flight, text = r and r.text,
                                 err = err }))
    ]], anthropic_env())
    expect.truthy(out.seen >= 1, "tokens arrived before the kill")
    expect.eq(out.canceled, 1)
    expect.eq(out.in_flight, 0)
    expect.eq(out.text, "next ok", tostring(out.err))
  end)

  it("raises an error from on_token out of chat, with the transfer aborted and the slot free", function()
    server{ chunk_delay = 0.05, replies = { { text = string.rep("abcd", 20) } } }
    local out = run([[
      kagent.llm.configure{ concurrency = 1 }
      local ok, err = pcall(kagent.llm.chat, { messages = { { role = "user", content = "x" } }, stream = true,
        on_token = function(text, p) if p.chars > 8 then error("display failed") end end })
      local st = kagent.http.stats()
      local r = kagent.llm.chat{ messages = { { role = "user", content = "y" } }, timeout = 5 }
      print(kagent.json.encode({ ok = ok, err = tostring(err), in_flight = st.in_flight, canceled = st.canceled,
                                 next = r and r.text }))
    ]], anthropic_env())
    expect.eq(out.ok, false)
    expect.match(out.err, "display failed")
    expect.eq(out.in_flight, 0)
    expect.eq(out.canceled, 1)
    expect.eq(out.next, string.rep("abcd", 20))
  end)

  it("records a streamed reply that replays without streaming, and the reverse", function()
    local ok_mem, mem = pcall(require, "kagent.mem")
    if not ok_mem or type(mem) ~= "table" or not mem.open then skip("kagent.mem is not available") end
    server{ replies = { { text = REPLY } } }
    local db = spec.tmpdir("llm-stream-replay") .. "/llm.db"
    local rec = run(STREAM:format("q", "true"), anthropic_env({ KAGENT_LLM_CACHE = "record", KAGENT_LLM_DB = db }))
    h.srv:reset()
    local rep = run(STREAM:format("q", "false"), anthropic_env({ KAGENT_LLM_CACHE = "replay", KAGENT_LLM_DB = db }))
    expect.eq(h.srv:stats().total_requests, 0)
    expect.eq(rep.r.text, rec.r.text)
    expect.eq(rep.r.cached, true)
    expect.same(rep.r.usage, rec.r.usage)
    expect.eq(#rep.calls, 1, "a replayed reply reaches on_token once")
    expect.eq(rep.calls[1].text, REPLY)
    -- Recorded whole, replayed with streaming on.
    local rec2 = run(STREAM:format("q2", "false"), anthropic_env({ KAGENT_LLM_CACHE = "record", KAGENT_LLM_DB = db }))
    h.srv:reset()
    local rep2 = run(STREAM:format("q2", "true"), anthropic_env({ KAGENT_LLM_CACHE = "replay", KAGENT_LLM_DB = db }))
    expect.eq(h.srv:stats().total_requests, 0)
    expect.eq(rep2.r.text, rec2.r.text)
    expect.eq(rep2.r.cached, true)
  end)
end)

describe("llm streaming teardown", function()
  after_all(function() h.stop() end)
end)
