-- The tuner as a policy: no LLM. A coordinate search over the best kernel's integer knobs (module
-- constants such as BLOCK_SIZE, CHUNK; launch keywords num_warps=, num_stages=; triton.Config
-- entries): each round evaluates the neighbours (x2, /2; num_stages +-1) of its knobs, those a
-- firing skill's `tunables` hint points at first, at most --tune-candidates of them; a knob
-- change tried from this kernel before (memory) is not tried again, unless it passed the promotion
-- gate then. It stops when no neighbour passes the promotion gate.
local features = require("agents.lib.features")
local promotion = require("agents.search.promotion")
local skills = require("agents.lib.skills")
local tunables = require("agents.lib.tunables")
local verifier = require("agents.roles.verifier")

local P = { name = "tune", llm = false }

function P.parents(beam, run)
  return { beam[1] }
end

function P.directions(parent, run)
  local hits = skills.retrieve(run.skills, parent.profile, features.extract(parent.code, run.problem_code, run.dtype, run.op_class))
  -- a change that beat this kernel before is tried again: a later run from the same kernel then
  -- finds (and measures anew) the best setting memory knows, instead of stopping at a slower one
  local function tried(sig)
    return run.mem:plan_tried(parent.fingerprint, "launch_tuning", sig) ~= nil
      and run.mem:plan_improved(parent.fingerprint, "launch_tuning", sig) == nil
  end
  local cands = tunables.candidates(parent.code, tunables.hints(hits), run.opts.tune_candidates, tried)
  if #cands == 0 then
    return {}, #tunables.find(parent.code) == 0 and "no tunable knobs found in the kernel" or "every neighbouring setting tried"
  end
  local out = {}
  for i, c in ipairs(cands) do
    local ch = c.change
    local what = string.format("%s: %d -> %d (line %d)", ch.name, ch.from, ch.to, ch.line)
    out[i] = { summary = what, category = "tuning", skill = "launch_tuning", role = "tuner", code = c.code,
      plan_signature = tunables.signature(ch), lesson = string.format("%s %d -> %d", ch.name, ch.from, ch.to),
      reasoning = "LLM-free tuner: coordinate step on a kernel knob" .. (ch.hint and (", skill hint " .. ch.hint) or ""),
      recommended_fixes = { { fix = string.format("set %s=%d", ch.name, ch.to), rationale = "measured" } } }
  end
  return out
end

-- expand: the knob change is the kernel; evaluate it (no LLM, so no repair)
function P.expand(parent, d, run, w)
  local v = verifier.run(run, d.code, w, { max_refine = 0 })
  return { code = v.code, result = v.result, tries = v.tries, cached = v.cached }
end

function P.keep(beam, children, run)
  return promotion.keep_best(run, beam, children)
end

function P.stop(state, run, default)
  if state.rounds_without_gain > 0 then return "converged: no neighbouring setting is faster beyond noise" end
  return default(state, run)
end

return P
