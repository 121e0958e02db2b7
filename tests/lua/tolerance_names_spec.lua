-- The tolerance names are the evaluator's (src/gpu/eval/kagent_eval/judge/compare.py TOLERANCE_SETS), which
-- its ready line lists as `tolerances`: the agents check --tolerance against that list, not a
-- copy of their own. The device records here are FAKE ones, as pool:devices() gives them.
local args = require("agents.run.args")
local options = require("agents.run.options")
local run_lib = require("agents.run")

describe("--tolerance", function()
  it("takes any name at parse time: the evaluator's list decides", function()
    expect.eq(assert(args.parse({ "--problem", "p.py", "--tolerance", "planted" }, options)).tolerance, "planted")
  end)

  it("is checked against the names the evaluator's ready line lists", function()
    local fake = { tolerances = { "strict", "planted" } }
    expect.eq(run_lib.unknown_tolerance("planted", fake), nil, "a name the evaluator lists")
    expect.eq(run_lib.unknown_tolerance("loose", fake),
      "--tolerance must be one of strict, planted (the evaluator's names), got 'loose'")
    expect.eq(run_lib.unknown_tolerance("kernelbench-v0.1", fake) ~= nil, true, "a name this evaluator does not list")
  end)

  it("is left to the evaluator when none is given or its ready line lists none", function()
    expect.eq(run_lib.unknown_tolerance(nil, { tolerances = { "strict" } }), nil)
    expect.eq(run_lib.unknown_tolerance("strict", {}), nil)
  end)
end)
