-- Greedy strategy: one parent (the best so far), all workers spent on its directions; the parent
-- changes only when a child is clearly faster than it.
local select = require("agents.lib.select")

local M = { name = "greedy" }

function M.parents(beam, opts)
  return { beam[1] }
end

function M.directions(parent, opts)
  return math.max(1, (opts.beam or 2) * (opts.directions or 2))
end

function M.keep(beam, children, opts)
  return select.next_beam(beam, children, 1)
end

return M
