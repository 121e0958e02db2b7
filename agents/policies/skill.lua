-- The skill policy (KernelSkill's loop): one parent, the best so far. Its profile picks a
-- bottleneck bucket, a headroom tier and the allowed skills by rules (agents/lib/buckets.lua);
-- the allowed skills are ranked by their learned record for this bucket, op class and GPU, with
-- exploration for untried ones. The planner picks one allowed skill per worker with metric
-- evidence; a plan memory has seen on this kernel is refused. A failing kernel is repaired in
-- rounds: an audit of the failure with its repair chain, then a minimal patch. The parent moves
-- only through the promotion gate. Every retrieval decision is in the trace: retrieval.json and
-- plan_prompt.txt in each worker's folder, rounds/round_<r>/directions_<parent>.json.
--   kagent-rt agents/skill.lua --problem P [--kernel K] [--directions 2] [--refine 3]
local features = require("agents.lib.features")
local retrieval = require("agents.lib.retrieval")
local promotion = require("agents.search.promotion")
local expand = require("agents.search.expand")
local planner = require("agents.roles.planner")
local auditor = require("agents.roles.auditor")

local P = { name = "skill" }

-- one trajectory: the best kernel so far is the only parent
function P.parents(beam, run) return { beam[1] } end

function P.directions(parent, run)
  local f = features.extract(parent.code, run.problem_code, run.dtype, run.op_class)
  local decision = retrieval.retrieve(run.skills, parent.profile or {}, f,
    function(bucket) return run.mem:skill_stats({ op_class = run.op_class, bottleneck = bucket }) end)
  local hints = { history = run.mem:history_text(parent.fingerprint), tried = run.mem:skills_tried(parent.fingerprint),
    lessons = run.mem:lessons_text({ op_class = run.op_class, bottleneck = decision.bucket,
      query = table.concat(decision.allowed, " ") }) }
  local plans, rec = planner.plans(run, parent, run.opts.directions, decision, hints)
  local out = {}
  for i, p in ipairs(plans) do
    out[i] = { summary = p.plan, category = decision.bucket, bucket = decision.bucket, skill = p.skill,
      plan_signature = p.signature, reasoning = decision.why, root_causes = { { cause = p.plan, evidence = p.evidence } },
      recommended_fixes = { { fix = p.change, rationale = "planned with skill " .. p.skill } },
      history = hints.history, lessons = hints.lessons,
      strategy = { skill = p.skill, plan = p.plan, change = p.change, params = p.params, evidence = p.evidence,
        signature = p.signature, source = p.source or "planner", bucket = decision.bucket, tier = decision.tier },
      trace = { ["retrieval.json"] = decision, ["plan_prompt.txt"] = rec.prompts[1], ["plan_reply.txt"] = rec.replies[1] } }
  end
  return out, { retrieval = decision, planned = #out, rejected = rec.rejected, refused = rec.refused, warnings = rec.warnings,
    replanned = rec.prompts[2] ~= nil, reason = #out == 0 and string.format("nothing left to plan on %s: %d plan(s) "
      .. "refused by memory, %d rejected", parent.id, #rec.refused, #rec.rejected) or nil }
end

-- expand: the LLM worker, with the auditor's diagnose-then-patch as its repair step
function P.expand(parent, d, run, w)
  return expand.expand(parent, d, run, w, { repair = auditor.repair })
end

function P.keep(beam, children, run)
  return promotion.keep_best(run, beam, children)
end

return P
