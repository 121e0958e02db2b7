-- kagent.llm's max_reply (issue #53, item 3): a reply whose text is over it fails with ETOOBIG,
-- is asked once, and is not read further: a stream is closed once its text passes the limit (no
-- more text reaches on_token), a whole reply's body is cut at the bound max_reply sets. Against
-- the FAKE provider server (tests/fixtures/fake_llm) on loopback.
local fake = dofile(kagent.root .. "/tests/fixtures/fake_llm/fake.lua")

local h = fake.cases{ python = spec.python, key = "sk-ant-test-max-reply-0123456789" }
local run, server = h.run, h.server

local CHAT = [[
  kagent.llm.configure{ max_reply = %d, stream = %s }
  local chars = 0
  local r, err, code, info = kagent.llm.chat{ messages = { { role = "user", content = "big" } },
    on_token = function(text) chars = chars + #text end }
  print(kagent.json.encode({ ok = r ~= nil, len = r and #r.text, err = err, code = code, info = info, chars = chars }))
]]

describe("llm max_reply", function()
  for _, mode in ipairs({ "streamed", "whole" }) do
    it("refuses a reply whose text is over max_reply with ETOOBIG, asked once (" .. mode .. ")", function()
      local srv = server{ replies = { { text = ("junk "):rep(40000) } } }  -- 200 KB of text
      local out = run(CHAT:format(16384, tostring(mode == "streamed")))
      expect.eq(out.code, "ETOOBIG", tostring(out.err))
      expect.match(out.err, "over max_reply %(16384 bytes%)")
      expect.eq(out.info.attempts, 1)
      expect.eq(out.info.retryable, false)
      expect.eq(srv:stats().requests["/v1/messages"], 1, "one request reached the server")
      -- a stream stops at the limit: nothing past it reached the caller
      expect.truthy(out.chars <= 16384, "text passed on after the limit: " .. out.chars)
      if mode == "whole" then
        expect.match(out.err, "its body passed %d+ bytes and the rest was not read")
      else
        expect.match(out.err, "%(streamed%): the rest was not read")
      end
    end)

    it("takes a reply within max_reply (" .. mode .. ")", function()
      server{ replies = { { text = ("word "):rep(3000) } } }  -- 15 KB
      local out = run(CHAT:format(16384, tostring(mode == "streamed")))
      expect.eq(out.ok, true, tostring(out.err))
      expect.eq(out.len, 15000)
    end)
  end

  it("refuses a bad max_reply", function()
    expect.errors(function() kagent.llm.configure{ max_reply = 0 } end, "max_reply must be a number of bytes > 0")
  end)

  h.stop()
end)
