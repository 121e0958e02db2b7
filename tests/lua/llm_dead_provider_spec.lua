-- A dead or hostile LLM provider with the default settings (issue #28, item 8): a request that is
-- accepted and never answered fails within one start timeout and is not asked again inside the
-- call; a reply larger than max_body fails with ETOOBIG and is never asked again (neither by
-- kagent.llm nor by the agents' guard); and the defaults add up to about two minutes before a
-- run on a dead provider stops. Against the fake provider server (tests/fixtures/fake_llm) on
-- loopback, with small limits so that each case takes about a second.
local fake = dofile(kagent.root .. "/tests/fixtures/fake_llm/fake.lua")
package.path = kagent.root .. "/?.lua;" .. package.path
local llm_guard = require("agents.run.llm_guard")
local options = require("agents.run.options")

local h = fake.cases{ python = spec.python, key = "sk-ant-test-dead-provider-0123456789" }
local run, server = h.run, h.server

local CHAT = [[
  local t0 = kagent.time.now()
  local r, err, code, info = kagent.llm.chat{ messages = { { role = "user", content = %q } } }
  print(kagent.json.encode({ ok = r ~= nil, streamed = r and r.streamed, err = err, code = code, info = info,
                             dt = kagent.time.now() - t0, u = kagent.llm.usage() }))
]]

describe("a dead LLM provider with the default settings", function()
  it("streams replies by default, so a live server is seen to answer", function()
    server{ replies = { { text = "hello" } } }
    local out = run(CHAT:format("hi"))
    expect.eq(out.ok, true, tostring(out.err))
    expect.eq(out.streamed, true)
  end)

  it("fails a request that is accepted and never answered within the start timeout, asking once", function()
    local srv = server{ replies = { { fault = "hang" } } }
    -- only the start timeout is small: the call's total, idle and retries are the defaults
    local out = run([[kagent.llm.configure{ start_timeout = 0.4 }]] .. CHAT:format("anyone there?"))
    expect.eq(out.code, "ETIMEDOUT")
    expect.match(out.err, "sent no reply for 0%.4 s %(start timeout%)")
    expect.eq(out.info.attempts, 1, "not asked again within the call")
    expect.truthy(out.dt < 3, "ended after the start timeout, not the idle or total one: " .. out.dt .. " s")
    expect.eq(srv:stats().requests["/v1/messages"], 1)
  end)

  it("reads start=DUR from KAGENT_LLM_TIMEOUT", function()
    server{ replies = { { fault = "hang" } } }
    local out = run(CHAT:format("anyone?"), h.env("anthropic", { KAGENT_LLM_TIMEOUT = "start=0.3s" }))
    expect.eq(out.code, "ETIMEDOUT")
    expect.match(out.err, "0%.3 s %(start timeout%)")
  end)

  it("still retries a stream that stalls after it started (the server was alive)", function()
    server{ replies = { { fault = "stall", stall_after = 1, text = ("word "):rep(40) } } }
    local out = run([[kagent.llm.configure{ idle_timeout = 0.3, backoff = { base = 0.01, max = 0.02 } }]]
      .. CHAT:format("stall"))
    expect.eq(out.code, "ETIMEDOUT")
    expect.eq(out.info.attempts, 1 + kagent.llm.DEFAULTS.retries)
  end)

  for _, mode in ipairs({ "streamed", "whole" }) do
    it("refuses a reply over max_body with ETOOBIG and asks once (" .. mode .. ")", function()
      local srv = server{ replies = { { text = ("junk "):rep(200000) } } }  -- 1 MB of text
      local out = run(([[kagent.llm.configure{ max_body = 65536, stream = %s }]]):format(tostring(mode == "streamed"))
        .. CHAT:format("big"))
      expect.eq(out.code, "ETOOBIG")
      expect.match(out.err, "larger than max_body %(65536 bytes%)")
      expect.eq(out.info.attempts, 1)
      expect.eq(out.info.retryable, false)
      expect.eq(srv:stats().requests["/v1/messages"], 1, "one request reached the server")
    end)
  end

  it("the agents' guard does not try an oversized reply again, but does a stalled one", function()
    for code, calls in pairs({ ETOOBIG = 1, ETIMEDOUT = 1 + llm_guard.RETRIES }) do
      local g = llm_guard.new({ limit = 10, backoff = 0, sleep = function() end })
      local n = 0
      g:call(function() n = n + 1; return nil, code .. ": x", code end, "t")
      expect.eq(n, calls, code)
    end
  end)

  it("adds up to about two minutes before a run on a dead provider stops", function()
    local limit, backoff = options["llm-failures"].default, options["llm-backoff"].default
    expect.eq(type(limit), "number", "--llm-failures has a default")
    expect.eq(type(backoff), "number", "--llm-backoff has a default")
    local s = llm_guard.worst_case_s({ limit = limit, backoff = backoff, llm = kagent.llm.DEFAULTS })
    expect.truthy(s >= 60 and s <= 150, "a dead provider stops a run in about 2 minutes, not " .. s .. " s")
    -- the old defaults (600 s per call whole, 6 retries, 30 s guard backoff) were an hour
    local old = llm_guard.worst_case_s({ limit = 6, backoff = 30, llm = { start = 600, connect = 10, retries = 6,
      backoff = { base = 1, max = 60 } } })
    expect.truthy(old > 3000, "the sum tells the old defaults apart: " .. old)
  end)

  h.stop()
end)
