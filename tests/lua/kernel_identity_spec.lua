-- One format per field (agents/search/attempt.lua): a kernel's `fingerprint` is the evaluator's AST
-- hash (16 hex digits) or nothing, its `source_hash` the agents' "src:" and 64 hex digits; a state
-- saved before the two were apart (the source hash under `fingerprint`) still reads, and the
-- run's table of kernels seen finds a kernel by either.
local attempt = require("agents.search.attempt")
local driver = require("agents.search.driver")
local fingerprint = require("agents.lib.fingerprint")
local rank = require("agents.lib.rank")

local AST = "0123456789abcdef"  -- what kagent_eval/common/fingerprint.py gives: 16 hex digits
local CODE = "class ModelNew:\n    pass\n"

local function result(fp)
  return { ok = true, stage = "done", fingerprint = fp, time_ms = { median = 1.0 } }
end

local function kernel(f)
  f.code = f.code or CODE
  return attempt.kernel(f)
end

describe("a kernel's hashes", function()
  it("are the evaluator's fingerprint and the agents' source hash, each in its field", function()
    local k = kernel({ id = "input", result = result(AST) })
    expect.eq(k.fingerprint, AST)
    expect.eq(k.source_hash, fingerprint.of(CODE))
    expect.truthy(k.source_hash:match("^src:" .. ("%x"):rep(64) .. "$"), k.source_hash)
    expect.eq(attempt.key(k), AST, "a kernel is known by the evaluator's fingerprint")
  end)

  it("leave the fingerprint empty when the evaluator gave none, rather than put the source hash there", function()
    local k = kernel({ id = "input", result = result(nil) })
    expect.eq(k.fingerprint, nil)
    expect.eq(k.source_hash, fingerprint.of(CODE))
    expect.eq(attempt.key(k), k.source_hash)
  end)

  it("of a verified attempt are shaped the same way", function()
    local w = { round = 1, k = 0, dir = "rounds/round_1/w0" }
    local a = attempt.shape({}, { id = "p" }, {}, { code = CODE, result = result(AST) }, w)
    expect.eq(a.fingerprint, AST)
    expect.eq(a.source_hash, fingerprint.of(CODE))
    local b = attempt.shape({}, { id = "p" }, {}, { code = CODE, result = result(nil) }, w)
    expect.eq(b.fingerprint, nil)
    expect.eq(b.source_hash, fingerprint.of(CODE))
  end)

  it("read from a state saved before the fields were apart: the source hash leaves `fingerprint`", function()
    local old = kernel({ id = "r1w0", fingerprint = fingerprint.of(CODE), result = result(AST) })
    expect.eq(old.fingerprint, AST, "the saved result's fingerprint")
    expect.eq(old.source_hash, fingerprint.of(CODE))
    local older = kernel({ id = "r1w1", fingerprint = fingerprint.of(CODE), result = result(nil) })
    expect.eq(older.fingerprint, nil)
    expect.eq(attempt.key(older), fingerprint.of(CODE))
  end)
end)

describe("the run's table of kernels seen", function()
  it("holds each kernel under both hashes, so an old state's keys still find it", function()
    local k = kernel({ id = "input", result = result(AST) })
    local known = driver.known_of(k)
    expect.eq(known[AST], "input")
    expect.eq(known[fingerprint.of(CODE)], "input")
    -- a state.json written before keyed the input by its source hash only
    local saved = { [fingerprint.of(CODE)] = "input" }
    local again = kernel({ id = "r2w0", result = result("fedcba9876543210") })
    expect.eq(saved[again.fingerprint] or saved[again.source_hash], "input", "the same source is a duplicate")
    driver.known_of(again, saved, "r2w0")
    expect.eq(saved.fedcba9876543210, "r2w0")
  end)

  it("and the beam tell a reformatted kernel by the evaluator's fingerprint, a kernel without one by its source", function()
    local a = kernel({ id = "a", result = result(AST) })
    local b = kernel({ id = "b", code = "class ModelNew:\n\n    pass  # same AST\n", result = result(AST) })
    expect.eq(#rank.distinct({ a, b }), 1, "one AST, one kernel")
    local c = kernel({ id = "c", result = result(nil) })
    local d = kernel({ id = "d", result = result(nil) })
    expect.eq(#rank.distinct({ c, d }), 1, "no evaluator fingerprint: the same source is the same kernel")
  end)
end)
