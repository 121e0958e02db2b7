-- Replies as real models write them, end to end on the CPU: agents/beam.lua against the FAKE LLM
-- server in its quirks mode (tests/fixtures/fake_llm/quirks.py), which answers each scripted
-- (clean) reply the way models get it wrong: JSON in prose or in the wrong fence, sloppy JSON,
-- renamed and nested keys, several code blocks, class Model, a reply cut at the length limit,
-- <think> blocks, reasoning_content, refusals, empty replies, a diff, another language, a
-- context-length error. One mode at a time, then all of them mixed (re-asks answered badly too,
-- so some replies are lost), then a model that never gives a usable direction. Every run ends
-- normally, no model failure is recorded as a kernel failure, and the reply counts in
-- summary.json match what the server's log says it served, role by role
-- (tests/fixtures/agent/quirks_session.lua). Needs a python with torch (KAGENT_PYTHON); skill,
-- generate and fuse: agent_quirks_{skill,generate,fuse}_cpu_spec.lua.
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local q = require("quirks_session")
local fs = kagent.fs

describe("beam.lua and replies as models write them", function()
  it("handles every failure mode alone, its counts matching the server's log", function()
    q.have_torch()
    q.one_mode_at_a_time("beam")
  end, { timeout = 900 })

  it("ends normally on the modes in turn, with exact counts", function()
    q.have_torch()
    local _, log, rd = q.mixed("beam", { reask = "next" }, { "--rounds", "2", "--directions", "2" })
    -- a mode that does not apply to a reply (class Model on JSON) is served clean: the log says
    -- what was really served, and a mixture it is
    local served, n = {}, 0
    for _, e in ipairs(log) do
      if e.kind == "first" and not served[e.mode] then served[e.mode], n = true, n + 1 end
    end
    expect.truthy(n >= 5, "modes served in one run: " .. n)
    local html = assert(fs.read(rd .. "/report.html"), "report.html")
    expect.match(html, "Replies by role")
    expect.match(html, 'id="replies"')
  end, { timeout = 600 })

  it("says on its last line that its directions came from rules when the model never gave one", function()
    q.have_torch()
    local s, log, rd, _, r = q.run("beam", { modes = { "refusal" }, reask = "next" })
    q.check_counts(s, log, "beam refusing")
    local t = s.replies.totals
    expect.eq(t.rules_share, 1, "every direction from rules")
    expect.eq(t.directions_model, 0)
    expect.truthy(t.directions_rules >= 1)
    expect.eq(s.replies.rules_warn, 0.5, "the default --rules-warn")
    local last = r.stderr:match("([^\n]+)\n*$")
    expect.match(last, "^%s*WARNING: %d+ of %d+ directions %(100%%%) came from the skills' rules, not the model")
    expect.match(assert(fs.read(rd .. "/report.html")), "a mostly rule%-driven run")
  end, { timeout = 600 })
end)
