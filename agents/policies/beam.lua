-- The beam policy (KernelAgent's loop): the N best distinct kernels are all parents; each parent
-- is profiled and diagnosed once, in ONE call that returns M ranked, distinct bottlenecks; every
-- bottleneck gets a worker (the default expand: rewrite -> verify/repair); old beam and verified
-- children are ranked on medians with noise and the N best distinct kernels kept.
--   kagent-rt agents/beam.lua --problem P --kernel K [--beam N] [--directions M]
local judge = require("agents.roles.judge")
local rank = require("agents.lib.rank")

local P = { name = "beam" }

-- parents(beam, run) -> the kernels expanded this round (the beam is distinct by construction)
function P.parents(beam, run)
  local out = {}
  for i = 1, math.min(#beam, run.opts.beam) do out[i] = beam[i] end
  return out
end

-- directions(parent, run) -> M bottlenecks from one diagnosis
function P.directions(parent, run)
  return judge.directions(run, parent, run.opts.directions)
end

-- keep(beam, children, run) -> the N best distinct kernels; a child whose fingerprint is
-- already held never enters, and noise never evicts a kernel already held
function P.keep(beam, children, run)
  return rank.next_beam(beam, children, run.opts.beam)
end

return P
