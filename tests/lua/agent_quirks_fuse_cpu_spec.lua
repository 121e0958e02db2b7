-- Replies as real models write them: agents/fuse.lua against the FAKE LLM server's quirks mode,
-- one failure mode at a time, then all mixed (its one worker per subgraph has nothing to fall back on: re-asks answered well): every run ends normally, no model failure is
-- a kernel failure, the reply counts match the server's log (tests/fixtures/agent/quirks_session.lua;
-- the modes: tests/lua/agent_quirks_beam_cpu_spec.lua). Needs a python with torch (KAGENT_PYTHON).
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local q = require("quirks_session")

describe("fuse.lua and replies as models write them", function()
  it("handles every failure mode alone, its counts matching the server's log", function()
    q.have_torch()
    q.one_mode_at_a_time("fuse")
  end, { timeout = 900 })

  it("ends normally on every mode in turn, with exact counts", function()
    q.have_torch()
    q.mixed("fuse", { reask = "clean", start = 4 }, {})
  end, { timeout = 600 })
end)
