-- The greedy policy: one parent, the best so far; every worker of the round (N x M) spent on its
-- directions from one diagnosis; the parent changes only when a child passes the promotion gate.
local judge = require("agents.roles.judge")
local promotion = require("agents.search.promotion")

local P = { name = "greedy" }

function P.parents(beam, run)
  return { beam[1] }
end

function P.directions(parent, run)
  return judge.directions(run, parent, math.max(1, run.opts.beam * run.opts.directions))
end

function P.keep(beam, children, run)
  return promotion.keep_best(run, beam, children)
end

return P
