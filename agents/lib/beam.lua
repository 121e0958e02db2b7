-- Beam search strategy: keep the N best distinct kernels; every kernel in the beam is a parent
-- next round, each explored in M directions. Replace this file (or pass --policy) to change how
-- parents are chosen and how children are kept.
local select = require("agents.lib.select")

local M = { name = "beam" }

-- parents(beam) -> the kernels to expand this round (distinct by construction).
function M.parents(beam, opts)
  local out = {}
  for i = 1, math.min(#beam, opts.beam or 2) do out[i] = beam[i] end
  return out
end

-- directions(parent, opts) -> how many bottleneck directions (workers) per parent.
function M.directions(parent, opts)
  return opts.directions or 2
end

-- keep(beam, children, opts) -> new beam.
function M.keep(beam, children, opts)
  return select.next_beam(beam, children, opts.beam or 2)
end

return M
