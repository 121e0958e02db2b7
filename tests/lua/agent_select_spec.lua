-- Selection under noise, distinct beam, the promotion gate and the stop rules
-- (agents/lib/rank.lua, promotion.lua, search.lua; policies beam and greedy).
package.path = kagent.root .. "/?.lua;" .. package.path
local rank = require("agents.lib.rank")
local promotion = require("agents.search.promotion")
local search = require("agents.search.driver")
local policy = require("agents.search.policy")
local beam = assert(policy.load("beam"))
local greedy = assert(policy.load("greedy"))

local function k(id, median, spread, fp, seq, ok)
  return { id = id, ok = ok ~= false, seq = seq or 0, fingerprint = fp or id,
    time = { median = median, p10 = median - spread, p90 = median + spread }, result = {} }
end

describe("rank.better", function()
  it("needs a gain beyond both spreads", function()
    expect.truthy(rank.better({ median = 1.0, p10 = 0.99, p90 = 1.01 }, { median = 1.2, p10 = 1.19, p90 = 1.21 }))
    expect.falsy(rank.better({ median = 1.0, p10 = 0.8, p90 = 1.2 }, { median = 1.1, p10 = 1.05, p90 = 1.15 }))
    expect.falsy(rank.better({ median = 1.0 }, { median = 1.005 }), "inside the 1% floor")
    expect.truthy(rank.better({ median = 1.0 }, nil), "anything beats no time")
    -- a heavy upper tail (interference) does not hide a 2x gain: measured on a loaded CPU
    expect.truthy(rank.better({ median = 0.93, p10 = 0.63, p90 = 4.90 }, { median = 2.22, p10 = 2.12, p90 = 6.39 }))
  end)
end)

describe("rank.next_beam", function()
  it("keeps the N best distinct kernels and never a failed child", function()
    local input = k("input", 2.0, 0.01, "fpA", 0)
    local fast = k("fast", 1.0, 0.01, "fpB", 1)
    local slow = k("slow", 5.0, 0.01, "fpC", 2)
    local dup = k("dup", 0.99, 0.01, "fpB", 3)
    local broken = k("broken", 0.1, 0.01, "fpD", 4, false)
    local b = rank.next_beam({ input }, { fast, slow, dup, broken }, 2)
    expect.eq(#b, 2)
    expect.eq(b[1].id, "fast")
    expect.eq(b[2].id, "input")
  end)
  it("a noisy slow child cannot push a clearly faster one or the incumbent out", function()
    -- measured on CPU: the slow child's p90 is 4x its median, so it ties with everything
    local input = { id = "input", ok = true, seq = 0, fingerprint = "a", time = { median = 0.20, p10 = 0.18, p90 = 0.33 } }
    local slow = { id = "slow", ok = true, seq = 1, fingerprint = "b", time = { median = 1.28, p10 = 0.75, p90 = 5.30 } }
    local fast = { id = "fast", ok = true, seq = 2, fingerprint = "c", time = { median = 0.046, p10 = 0.044, p90 = 0.050 } }
    local b = rank.next_beam({ input }, { slow, fast }, 2)
    expect.eq(b[1].id .. "," .. b[2].id, "fast,input")
  end)
  it("prefers the incumbent when a child is only faster by noise", function()
    local parent = k("parent", 1.00, 0.05, "p", 0)
    local child = k("child", 0.97, 0.05, "c", 1)
    local b = rank.next_beam({ parent }, { child }, 1)
    expect.eq(b[1].id, "parent")
  end)
  it("policies: beam expands its N best, greedy only the best", function()
    local run = { opts = { beam = 2, directions = 3 } }
    local b = { k("a", 1, 0), k("b", 2, 0), k("c", 3, 0) }
    expect.eq(#beam.parents(b, run), 2)
    expect.eq(#greedy.parents(b, run), 1)
  end)
end)

describe("promotion.promote", function()
  local run = { opts = { min_gain = 1 } }
  local function res(median, spread, ok)
    return { result = { ok = ok ~= false, time_ms = { median = median, p10 = median - spread, p90 = median + spread } } }
  end
  it("promotes only a verified child faster beyond the gain and both spreads", function()
    expect.truthy(promotion.promote(run, res(1.0, 0.01), res(0.8, 0.01)))
    expect.falsy(promotion.promote(run, res(1.0, 0.01), res(0.995, 0.001)), "inside 1%")
    local same, why_same = promotion.promote(run, res(0.1022, 0.02), res(0.0859, 0.005))
    expect.falsy(same, "16% faster, inside the parent's spread")
    -- "same" shows the spreads that made it so, not a bare "inside 1% or the spreads"
    expect.eq(why_same, "0.0859 ms vs 0.1022 ms: 15.9% faster, inside the noise: spreads ±0.0050 ms (child) and "
      .. "±0.0200 ms (parent); a gain must pass 0.0200 ms (the larger spread, at least 1%)")
    local _, why_slower = promotion.promote(run, res(1.0, 0.01), res(1.2, 0.01))
    expect.eq(why_slower, "1.2000 ms vs 1.0000 ms: not faster (spreads ±0.0100 ms (child) and ±0.0100 ms (parent))")
    expect.falsy(promotion.promote(run, res(1.0, 0.2), res(0.85, 0.01)), "inside the parent's spread")
    expect.falsy(promotion.promote({ opts = { min_gain = 30 } }, res(1.0, 0.01), res(0.8, 0.01)), "below a 30% gate")
    local ok, why = promotion.promote(run, res(1.0, 0.01), res(0.1, 0.01, false))
    expect.falsy(ok, "an unverified child never wins")
    expect.match(why, "not verified")
  end)
  it("confirms a gain by timing parent and child interleaved in one job", function()
    -- a FAKE pool: each comparison answers the next scripted list of per-pair ratios
    local asked = {}
    local function gated(...)
      local answers = { ... }
      local pool = { compare = function(_, job)
        asked[#asked + 1] = job
        local ratios = table.remove(answers, 1)
        if not ratios then return { ok = false, stage = "timing", error = "EUNTRUSTED: fake" } end
        table.sort(ratios)
        local sum, sq = 0, 0
        for _, r in ipairs(ratios) do sum = sum + r end
        local mean = sum / #ratios
        for _, r in ipairs(ratios) do sq = sq + (r - mean) ^ 2 end
        local median = (ratios[math.floor((#ratios + 1) / 2)] + ratios[math.ceil((#ratios + 1) / 2)]) / 2
        return { ok = true, candidates = { { speedup = { median = 1, cv = 0 } },
          { speedup = { median = median, min = ratios[1], p10 = ratios[1], p90 = ratios[#ratios],
            cv = math.sqrt(sq / #ratios) / mean, pairs = #ratios, ratios = ratios } } } }
      end }
      return { opts = { min_gain = 1 }, can_profile = true, pool = pool,
        job = function(code, extra) local j = { candidate = code }; for k, v in pairs(extra) do j[k] = v end; return j end }
    end
    local function kern(median, code)
      local r = res(median, 0.001)
      r.code, r.fingerprint = code, code
      return r
    end
    expect.truthy(promotion.promote(gated({ 1.24, 1.25, 1.25, 1.26 }), kern(1.0, "P"), kern(0.8, "C")))
    expect.eq(asked[1].candidates[1], "P")
    expect.eq(asked[1].candidates[2], "C")
    expect.eq(asked[1].rounds, promotion.ROUNDS)
    local ok, why = promotion.promote(gated({ 1.0, 1.004, 1.005, 1.006 }), kern(1.0, "P"), kern(0.8, "C2"))
    expect.falsy(ok, "the search-time gain does not hold up interleaved")
    expect.match(why, "under 1%%")
    local n = #asked
    ok, why = promotion.promote(gated({ 1.0, 1.2, 1.3, 1.5 }, { 0.9, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 0.95, 1.0,
      1.05, 1.2, 1.3, 1.4, 1.5, 1.6 }), kern(1.0, "P"), kern(0.8, "C3"))
    expect.falsy(ok, "blocks that disagree, twice")
    expect.match(why, "cv")
    expect.eq(#asked, n + 2, "the larger comparison made once")
    expect.eq(asked[#asked].rounds, promotion.ROUNDS_AGAIN)
    expect.truthy(promotion.promote(gated({ 1.5, 2.0, 3.0, 4.0 }), kern(1.0, "P"), kern(0.3, "C5")),
      "a gain every pair shows passes however much the pairs differ")
    -- one pair of four stalled on a loaded machine: the larger comparison, 14 pairs of 16
    -- above the bar, decides
    n = #asked
    ok, why = promotion.promote(gated({ 1.0, 8.0, 12.0, 14.0 }, { 0.9, 1.0, 5, 6, 7, 8, 9, 10, 11, 11, 12, 12, 13, 13, 14, 14 }),
      kern(1.0, "P"), kern(0.1, "C6"))
    expect.truthy(ok, why)
    expect.eq(#asked, n + 2)
    expect.match(why, "14 of 16 pairs")
    ok, why = promotion.promote(gated({ 1.0, 8.0, 12.0, 14.0 }, { 0.9, 1.0, 1.0, 1.0, 7, 8, 9, 10, 11, 11, 12, 12, 13, 13, 14, 14 }),
      kern(1.0, "P"), kern(0.1, "C7"))
    expect.falsy(ok, "12 of 16 pairs could be chance (over 1 in 32)")
    expect.match(why, "12 of 16 pairs")
    ok, why = promotion.promote(gated({ 1.0, 8.0, 12.0, 14.0 }), kern(1.0, "P"), kern(0.1, "C8"))
    expect.falsy(ok, "a larger comparison that fails is no gain")
    expect.match(why, "again: interleaved timing failed: EUNTRUSTED")
    n = #asked
    expect.falsy(promotion.promote(gated({ 1.25, 1.25, 1.25, 1.25 }), kern(1.0, "P"), kern(0.999, "C4")))
    expect.eq(#asked, n, "no interleaved job for a child that is not even nominally faster")
  end)
  it("rules out chance with a one-sided sign test over the pairs", function()
    expect.eq(promotion.chance_of(4, 4), 1 / 16)
    expect.eq(promotion.chance_of(0, 4), 1)
    expect.eq(promotion.chance_of(13, 16), 697 / 65536)
    expect.truthy(promotion.chance_of(12, 16) > promotion.CHANCE_AGAIN)
    expect.truthy(promotion.chance_of(3, 4) > promotion.CHANCE, "three pairs of four is not enough")
  end)
  it("keep_best moves the head only through the gate", function()
    local head = k("head", 1.0, 0.01, "h", 0)
    head.result = { ok = true, time_ms = head.time }
    local near = k("near", 0.995, 0.01, "n", 1)
    near.result = { ok = true, time_ms = near.time }
    local fast = k("fast", 0.5, 0.01, "f", 2)
    fast.result = { ok = true, time_ms = fast.time }
    expect.eq(promotion.keep_best(run, { head }, { near })[1].id, "head")
    expect.eq(promotion.keep_best(run, { head }, { near, fast })[1].id, "fast")
  end)
end)

describe("search stop rules", function()
  -- a FAKE pool: the re-measure a SOL stop asks for returns the scripted roofline
  local function fake_run(sol, opts)
    local o = { sol_stop = 95, plateau = 3 }
    for key, v in pairs(opts or {}) do o[key] = v end
    local calls = 0
    local run = { opts = o, usage = function() return { cost_usd = 2.5, tokens = 1e6 } end,
      job = function(code) return { candidate = code } end,
      pool = { benchmark = function() calls = calls + 1; return { ok = sol ~= nil, roofline = { sol_pct = sol }, error = "EFAKE" } end } }
    return run, function() return calls end
  end
  local function state(sol, rwg) return { best = { id = "b", sol_pct = sol, code = "" }, rounds_without_gain = rwg or 0, sol_checked = {} } end
  it("stops at a confirmed speed-of-light, once measured, and never on a figure above 100%", function()
    local run, calls = fake_run(97)
    local st = state(96)
    expect.match(search.default_stop(st, run), "speed%-of%-light 97.0%% >= 95%% %(confirmed%)")
    search.default_stop(st, run)
    expect.eq(calls(), 1, "confirmed once per best kernel")
    local run2 = fake_run(140)
    expect.eq(search.default_stop(state(140), run2), nil, "140% is beyond the physical bound")
    local run3 = fake_run(nil)
    expect.eq(search.default_stop(state(99), run3), nil, "a failed re-measure confirms nothing")
    expect.eq(search.default_stop(state(50, 1), fake_run(50)), nil)
  end)
  it("stops on a plateau and on the budget", function()
    expect.match(search.default_stop(state(nil, 3), fake_run(nil)), "plateau")
    expect.match(search.budget_stop(fake_run(nil, { budget_usd = 2 })), "budget")
    expect.match(search.budget_stop(fake_run(nil, { budget_tokens = 5e5 })), "budget")
    expect.eq(search.budget_stop(fake_run(nil)), nil)
  end)
end)
