-- The run's watch over its LLM (agents/run/llm_guard.lua): failed calls tried again after a
-- backoff when the failure may pass, the LLM declared down after --llm-failures in a row (and no
-- call made after that), and what is not the LLM's failure not counted. A FAKE call function
-- stands for kagent.llm.chat; sleeping is recorded, not done.
package.path = kagent.root .. "/?.lua;" .. package.path
local llm_guard = require("agents.run.llm_guard")

-- calls(script) -> fn, log: fn answers from the script in order ("ok" or a code), log counts calls
local function calls(script)
  local n = { calls = 0 }
  return function()
    n.calls = n.calls + 1
    local what = script[n.calls] or "ok"
    if what == "ok" then return { text = "fine" } end
    return nil, what .. ": scripted failure", what
  end, n
end

local function guard(limit)
  local waits = {}
  local g = llm_guard.new({ limit = limit, backoff = 10, sleep = function(s) waits[#waits + 1] = s end })
  return g, waits
end

describe("llm_guard", function()
  it("tries a call again after a growing, jittered backoff when the failure may pass", function()
    local g, waits = guard(10)
    local fn, n = calls({ "ECONNECT", "EHTTP" })
    local res = g:call(fn, "optimize")
    expect.eq(res.text, "fine")
    expect.eq(n.calls, 3)
    expect.eq(#waits, 2)
    expect.truthy(waits[1] >= 5 and waits[1] <= 10, "first wait in [backoff/2, backoff]: " .. waits[1])
    expect.truthy(waits[2] >= 10 and waits[2] <= 20, "then twice that: " .. waits[2])
    expect.eq(g.failures, 2)
    expect.eq(g.consecutive, 0, "a success ends the streak")
    expect.same(g:summary(), { by_code = { ECONNECT = 1, EHTTP = 1 }, calls = 2 })
  end)

  it("takes a reply too large (ETOOBIG) for a failed reply, not a failure of the LLM", function()
    local g = guard(2)
    for _ = 1, 3 do
      local fn, n = calls({ "ETOOBIG" })
      local res, _, code = g:call(fn, "optimize")
      expect.eq(res, nil)
      expect.eq(code, "ETOOBIG")
      expect.eq(n.calls, 1, "not asked again: the same request brings the same reply")
    end
    expect.eq(g.down, nil, "three in a row with --llm-failures 2: the LLM answered each time")
    expect.same(g:summary(), { by_code = {}, calls = 0 })
    g:call(calls({ "ECONNECT", "ECONNECT", "ECONNECT" }), "optimize")
    expect.truthy(g.down, "real failures still bring it down")
  end)

  it("gives up on a call after its retries, and does not retry what time will not fix", function()
    local g = guard(10)
    local fn, n = calls({ "ETIMEDOUT", "ETIMEDOUT", "ETIMEDOUT", "ETIMEDOUT" })
    local res, err, code = g:call(fn)
    expect.eq(res, nil)
    expect.eq(code, "ETIMEDOUT")
    expect.eq(n.calls, 1 + llm_guard.RETRIES)
    local fn2, n2 = calls({ "EBADREQ" })
    expect.eq(select(3, g:call(fn2)), "EBADREQ")
    expect.eq(n2.calls, 1, "a rejected request is not sent again")
  end)

  it("declares the LLM down after the limit of failures in a row, and calls nothing after that", function()
    local g = guard(3)
    local fn, n = calls({ "EHTTP", "EHTTP", "EHTTP", "EHTTP" })
    local _, err, code = g:call(fn)
    expect.eq(n.calls, 3, "the third failure in a row stops the retries")
    expect.truthy(g.down and g.down:find("3 LLM calls failed in a row", 1, true), tostring(g.down))
    local fn2, n2 = calls({})
    local res2, err2, code2 = g:call(fn2)
    expect.eq(res2, nil)
    expect.eq(n2.calls, 0, "not called once the LLM is down")
    expect.eq(code2, "EHTTP", "the failure that brought it down")
    expect.truthy(err2:find("not called", 1, true), err2)
  end)

  it("brings the LLM down at the first refused key or 404, a fault no later call can pass", function()
    for _, code in ipairs({ "EAUTH", "ENOTFOUND" }) do
      local g = guard(6)
      local fn, n = calls({ code, code })
      g:call(fn)
      expect.eq(n.calls, 1, code .. ": not asked again")
      expect.eq(g.fatal, code)
      expect.truthy(g.down, code .. ": down at once, not after 6 in a row")
    end
  end)

  it("does not count a spent budget, a canceled call or a replay miss as an LLM failure", function()
    local g = guard(2)
    for _ = 1, 3 do g:call(calls({ "EBUDGET" })) end
    g:call(calls({ "ECANCELED" }))
    for _ = 1, 3 do
      local fn, n = calls({ "EREPLAY", "EREPLAY" })
      expect.eq(select(3, g:call(fn)), "EREPLAY")
      expect.eq(n.calls, 1, "a question the record has no answer to is not asked again")
    end
    expect.eq(g.failures, 0)
    expect.eq(g.down, nil)
  end)

  it("keeps the counts of earlier processes of a resumed run", function()
    local g = llm_guard.new({ failures = 4, by_code = { ECONNECT = 4 } })
    g:record(false, "ECONNECT", "ECONNECT: refused")
    expect.same(g:summary(), { by_code = { ECONNECT = 5 }, calls = 5 })
    expect.eq(g.consecutive, 1, "a new process starts a new streak")
  end)
end)
