-- The last line of a run names the confirmed figure, and the line under it says why it may
-- differ from the best figure the status line showed during the search (agents/search/summary.lua).
local summary = require("agents.search.summary")

describe("the final line", function()
  it("names the search's figure and why the confirmed one differs", function()
    local l = summary.figures_line(0.0882, 0.2431, { remeasured = true }, { median = 0.2431, hardened = false })
    expect.match(l, "the search measured 0%.0882 ms %(2%.76x faster than the confirmed figure%)")
    expect.match(l, "timed as they were, and confirmed by a fresh process with new input values before every call")
    expect.match(l, "the speedups use it")
  end)

  it("says where the result is the re-measure's figure and the speedups mix two methods", function()
    local l = summary.figures_line(0.1, 0.2, { remeasured = true }, { median = 0.2, hardened = true })
    expect.match(l, "as the first timing raised a flag; the baselines were timed on rotated inputs")
  end)

  it("says the two agree when they do", function()
    expect.match(summary.figures_line(0.1000, 0.1020, { remeasured = true }), "the search measured 0%.1000 ms; the confirmation %(.*%) agrees")
  end)

  it("has no search figure to compare with for a kernel that was never searched", function()
    expect.match(summary.figures_line(nil, 0.5, nil), "^confirmed by a fresh job next to the baselines")
  end)
end)

describe("the final line on shapes", function()
  it("names the sizes a best fails at and the evaluator's reason", function()
    local l = summary.shapes_line({ generalizes = "no",
      generalization = { { sizes = { dim1 = 17, batch_size = 3 }, reason = "RuntimeError: shape '[4, 16]' is invalid" } } })
    expect.match(l, "^\n  only at the problem's shapes: fails at batch_size=3, dim1=17 %(RuntimeError: shape '%[4, 16%]' is invalid%)")
    expect.match(l, "%-%-require%-generalize refuses such a kernel")
  end)

  it("says which faster finalist a kernel that generalizes was chosen over", function()
    local l = summary.shapes_line({ generalizes = "yes", preferred_general = { id = "r2w1", over = "r1w1",
      reason = "r2w1 generalizes and r1w1 does not (fails on the problem resized); their figures are within noise" } })
    expect.match(l, "^\n  chosen over r1w1: r2w1 generalizes and r1w1 does not")
  end)

  it("says nothing of a best that generalizes or was not checked", function()
    expect.eq(summary.shapes_line({ generalizes = "yes" }), "")
    expect.eq(summary.shapes_line({ generalizes = "n/a" }), "")
  end)
end)

