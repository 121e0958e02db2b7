-- examples/policies/rule_sweep.lua: a search policy in one file (docs/policies.md). The best kernel
-- is the only parent; its directions come straight from the skill rules — the --directions skills
-- whose rules fire on its profile, ranked by their learned record — with no diagnosis call; each
-- goes to the default LLM worker; the parent changes only through the promotion gate.
--   kagent-rt agents/beam.lua --policy examples/policies/rule_sweep.lua --problem P --kernel K
local features = require("agents.lib.features")
local promotion = require("agents.search.promotion")
local skills = require("agents.lib.skills")

local P = { name = "rule_sweep" }

function P.parents(beam, run)
  return { beam[1] }
end

function P.directions(parent, run)
  local code_features = features.extract(parent.code, run.problem_code, run.dtype)
  local hits = skills.retrieve(run.skills, parent.profile, code_features,
    { limit = run.opts.directions, stats = run.mem:skill_stats({ op_class = run.op_class }) })
  local out = {}
  for i, h in ipairs(hits) do
    out[i] = { skill = h.skill.name, category = h.skill.category, summary = "apply " .. h.skill.name,
      reasoning = h.why, recommended_fixes = { { fix = h.skill.intent } } }
  end
  return out
end

function P.keep(beam, children, run)
  return promotion.keep_best(run, beam, children)
end

return P
