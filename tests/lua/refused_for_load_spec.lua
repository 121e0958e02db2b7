-- The specs' allowance for a loaded machine (tests/fixtures/agent/fake_session.lua refused_for_load):
-- a run left unconfirmed only by the refusals noise raises is let through; any other refusal or
-- exit is not.
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fake = require("fake_session")
local json, proc = kagent.json, kagent.proc

local DISAGREE = "EUNTRUSTED: a fresh hardened re-measure disagrees with the first"
local SPREAD = "EUNTRUSTED: the timed calls vary too much (p90/p10 above the limit)"
local STREAM = "EUNTRUSTED: device work ran outside the timed events (on another stream or after the call returned)"

local function summary(...)
  local tried = {}
  for i, t in ipairs({ ... }) do tried[i] = { id = "r1w" .. i, ok = false, stage = t[1], error = t[2] } end
  return { status = "unconfirmed", confirmation = tried }
end

describe("refused_for_load", function()
  it("lets through a run every finalist of which was refused for noise", function()
    expect.truthy(fake.refused_for_load({ code = 5 }, summary({ "timing", DISAGREE })))
    expect.truthy(fake.refused_for_load({ code = 5 }, summary({ "timing", SPREAD }, { "timing", DISAGREE })))
    expect.truthy(fake.refused_for_load({ code = 5 }, summary({ "timing", (DISAGREE:gsub("first$", "first; the timed calls vary too much (p90/p10 above the limit)")) })))
    -- as the evaluator words a spread refusal: with the calls' p90/p10 of each measure
    expect.truthy(fake.refused_for_load({ code = 5 }, summary({ "timing", SPREAD .. " (p90/p10 of the calls: first 3.32, re-measure 11)" })))
    expect.truthy(fake.refused_for_load({ code = 5 }, summary({ "timing", DISAGREE .. "; the timed calls vary too much (p90/p10 above the limit) (p90/p10 of the calls: first 1.2e+03, re-measure 23.2)" })))
  end)

  it("knows the evaluator's noise refusals as the evaluator words them", function()
    local r = assert(proc.run({ spec.python, "-c", "import json; from kagent_eval import trust; "
      .. "print(json.dumps(sorted(trust.TRUST_RULES[f][1] for f in trust.NOISE_FLAGS)))" },
      { env = { PYTHONPATH = kagent.root .. "/src/gpu/eval" }, timeout = 60 }))
    expect.eq(r.code, 0, r.stderr)
    local known = {}
    for _, reason in ipairs(fake.LOAD_REFUSALS) do known[reason] = true end
    for _, reason in ipairs(json.decode(r.stdout)) do
      expect.truthy(known[reason], "fake_session.LOAD_REFUSALS lacks: " .. reason)
    end
    expect.eq(#fake.LOAD_REFUSALS, #json.decode(r.stdout), "one entry per noise flag")
    -- a spread refusal as the evaluator writes it, with its detail (remeasure.py)
    r = assert(proc.run({ spec.python, "-c", "from kagent_eval import remeasure, trust; r = {'flags': []}; "
      .. "trust.reject_untrusted(r, ['spread', 'remeasure_disagrees'], "
      .. "remeasure._trust_detail({'spread': 3.32}, {'spread': 11.0}, True)); print(r['error'])" },
      { env = { PYTHONPATH = kagent.root .. "/src/gpu/eval" }, timeout = 60 }))
    expect.eq(r.code, 0, r.stderr)
    local worded = r.stdout:gsub("%s+$", "")
    expect.match(worded, "p90/p10 of the calls", "the detail is in the message")
    expect.truthy(fake.refused_for_load({ code = 5 }, summary({ "timing", worded })), worded)
  end)

  it("not a refusal a cheat or a failure raises, nor another exit", function()
    expect.falsy(fake.refused_for_load({ code = 5 }, summary({ "timing", STREAM })))
    expect.falsy(fake.refused_for_load({ code = 5 }, summary({ "timing", DISAGREE .. "; " .. (STREAM:gsub("^EUNTRUSTED: ", "")) })))
    expect.falsy(fake.refused_for_load({ code = 5 }, summary({ "timing", SPREAD .. " (first: 3 of 50 calls with work outside the events, 0 records outside every call)" })))
    expect.falsy(fake.refused_for_load({ code = 5 }, summary({ "timing", DISAGREE }, { "correctness", "EMISMATCH: output 0 differs" })))
    expect.falsy(fake.refused_for_load({ code = 5 }, summary({ "timing", "ESTALE: a timed call returned a stale output" })))
    expect.falsy(fake.refused_for_load({ code = 5 }, summary()))
    expect.falsy(fake.refused_for_load({ code = 1 }, summary({ "timing", DISAGREE })))
    expect.falsy(fake.refused_for_load({ code = 5 }, nil))
    expect.falsy(fake.refused_for_load({ code = 0 }, { status = "done" }))
  end)

  it("reports a spec skipped for such a run folder, and leaves every other run alone", function()
    local dir = spec.tmpdir("refused-skip")
    local real, said = skip, nil
    skip = function(msg) said = msg; error("skipped") end  -- luacheck: ignore (the runner's global)
    local function try(r, s)
      said = nil
      kagent.fs.write(dir .. "/summary.json", json.encode(s))
      pcall(fake.skip_if_refused_for_load, r, dir)
      return said
    end
    local ok, err = pcall(function()
      expect.match(try({ code = 5 }, summary({ "timing", DISAGREE })), "too loaded to confirm")
      expect.eq(try({ code = 5 }, summary({ "timing", STREAM })), nil, "a cheat's refusal fails the spec")
      expect.eq(try({ code = 0 }, summary({ "timing", DISAGREE })), nil, "another exit")
      -- an attempt of a round refused for noise: a spec counting what each kernel did skips
      local function attempt(stage, err)
        said = nil
        kagent.fs.mkdir_p(dir .. "/rounds/round_1/w2")
        kagent.fs.write(dir .. "/rounds/round_1/w2/verify_1.json", json.encode({ ok = false, stage = stage, error = err }))
        pcall(fake.skip_if_an_attempt_refused_for_load, dir)
        return said
      end
      expect.match(attempt("timing", SPREAD .. " (p90/p10 of the calls: first 12, re-measure 30)"), "too loaded to time round_1/w2")
      expect.eq(attempt("timing", STREAM), nil, "a cheat's refusal is counted as the spec says")
      expect.eq(attempt("correctness", "EMISMATCH: output 0 differs"), nil)
    end)
    skip = real  -- luacheck: ignore
    assert(ok, err)
  end)
end)
