-- Selection under noise, distinct beam and early stop (agents/lib/select.lua, beam.lua, greedy.lua).
package.path = kagent.root .. "/?.lua;" .. package.path
local select = require("agents.lib.select")
local beam = require("agents.lib.beam")
local greedy = require("agents.lib.greedy")

local function k(id, median, spread, fp, seq, ok)
  return { id = id, ok = ok ~= false, seq = seq or 0, fingerprint = fp or id,
    time = { median = median, p10 = median - spread, p90 = median + spread }, result = {} }
end

describe("select.better", function()
  it("needs a gain beyond both spreads", function()
    expect.truthy(select.better({ median = 1.0, p10 = 0.99, p90 = 1.01 }, { median = 1.2, p10 = 1.19, p90 = 1.21 }))
    expect.falsy(select.better({ median = 1.0, p10 = 0.8, p90 = 1.2 }, { median = 1.1, p10 = 1.05, p90 = 1.15 }))
    expect.falsy(select.better({ median = 1.0 }, { median = 1.005 }), "inside the 1% floor")
    expect.truthy(select.better({ median = 1.0 }, nil), "anything beats no time")
    -- a heavy upper tail (interference) does not hide a 2x gain: measured on a loaded CPU
    expect.truthy(select.better({ median = 0.93, p10 = 0.63, p90 = 4.90 }, { median = 2.22, p10 = 2.12, p90 = 6.39 }))
  end)
end)

describe("select.next_beam", function()
  it("keeps the N best distinct kernels and never a failed child", function()
    local input = k("input", 2.0, 0.01, "fpA", 0)
    local fast = k("fast", 1.0, 0.01, "fpB", 1)
    local slow = k("slow", 5.0, 0.01, "fpC", 2)
    local dup = k("dup", 0.99, 0.01, "fpB", 3)
    local broken = k("broken", 0.1, 0.01, "fpD", 4, false)
    local b = select.next_beam({ input }, { fast, slow, dup, broken }, 2)
    expect.eq(#b, 2)
    expect.eq(b[1].id, "fast")
    expect.eq(b[2].id, "input")
  end)
  it("a noisy slow child cannot push a clearly faster one or the incumbent out", function()
    -- measured on CPU: the slow child's p90 is 4x its median, so it ties with everything
    local input = { id = "input", ok = true, seq = 0, fingerprint = "a", time = { median = 0.20, p10 = 0.18, p90 = 0.33 } }
    local slow = { id = "slow", ok = true, seq = 1, fingerprint = "b", time = { median = 1.28, p10 = 0.75, p90 = 5.30 } }
    local fast = { id = "fast", ok = true, seq = 2, fingerprint = "c", time = { median = 0.046, p10 = 0.044, p90 = 0.050 } }
    local b = select.next_beam({ input }, { slow, fast }, 2)
    expect.eq(b[1].id .. "," .. b[2].id, "fast,input")
  end)
  it("prefers the incumbent when a child is only faster by noise", function()
    local parent = k("parent", 1.00, 0.05, "p", 0)
    local child = k("child", 0.97, 0.05, "c", 1)
    local b = select.next_beam({ parent }, { child }, 1)
    expect.eq(b[1].id, "parent")
  end)
  it("strategies: beam expands N parents x M directions, greedy one parent", function()
    local opts = { beam = 2, directions = 3 }
    local b = { k("a", 1, 0), k("b", 2, 0), k("c", 3, 0) }
    expect.eq(#beam.parents(b, opts), 2)
    expect.eq(beam.directions(b[1], opts), 3)
    expect.eq(#greedy.parents(b, opts), 1)
    expect.eq(greedy.directions(b[1], opts), 6)
  end)
end)

describe("select.should_stop", function()
  it("stops at speed-of-light, on a plateau and on the budget", function()
    expect.match(select.should_stop({ best = { sol_pct = 96 } }, {}), "speed%-of%-light")
    expect.eq(select.should_stop({ best = { sol_pct = 50 }, rounds_without_gain = 1 }, { plateau = 3 }), nil)
    expect.match(select.should_stop({ best = {}, rounds_without_gain = 3 }, { plateau = 3 }), "plateau")
    expect.match(select.should_stop({ best = {}, cost_usd = 2.5 }, { budget_usd = 2 }), "budget")
    expect.match(select.should_stop({ best = {}, tokens = 1e6 }, { budget_tokens = 5e5 }), "budget")
  end)
end)
