-- Manager role: runs one round. Every parent is expanded in its own task (profile once ->
-- diagnose once -> its M workers in parallel), so all LLM calls and GPU jobs of a round are in
-- flight together; the evaluator pool queues GPU work, nothing else serialises.
local task = require("kagent.task")
local json = require("kagent.json")
local log = require("kagent.log")
local select = require("agents.lib.select")
local features = require("agents.lib.features")
local skills_lib = require("agents.lib.skills")
local fingerprint = require("agents.lib.fingerprint")
local profiler = require("agents.roles.profiler")
local judge = require("agents.roles.judge")
local optimizer = require("agents.roles.optimizer")
local verifier = require("agents.roles.verifier")
local reflector = require("agents.roles.reflector")

local M = {}

local function busy(ctx, d)
  ctx.busy = (ctx.busy or 0) + d
  if ctx.progress then ctx.progress:update({ busy = ctx.busy }) end
end

local function error_signature(err)
  if not err then return nil end
  return tostring(err):match("^(%u+):") or tostring(err):sub(1, 40)
end

-- classify(ctx, parent, fp, time) -> "improved"|"same"|"slower"|"duplicate"
-- Claims the fingerprint (single-threaded between yields, so two workers of one round that
-- produce the same kernel cannot both win).
function M.classify(ctx, parent, fp, t)
  if fp == parent.fingerprint or ctx.known[fp] then return "duplicate" end
  ctx.known[fp] = true
  if select.better(t, parent.result.time_ms) then return "improved" end
  if select.better(parent.result.time_ms, t) then return "slower" end
  return "same"
end

-- worker(ctx, parent, b, shared, round, k) -> child kernel record or nil
function M.worker(ctx, parent, b, shared, round, k)
  local rd = ctx.rd
  local dir = rd:worker_dir(round, k)
  profiler.write(ctx, dir, parent, "input", round)
  rd:write(dir .. "/bottleneck_prompt.txt", shared.prompt)
  rd:write(dir .. "/bottleneck_response.txt", shared.reply)
  rd:write(dir .. "/strategy.json", { b })
  rd:write(dir .. "/parent.json", { parent = parent.id, parent_fingerprint = parent.fingerprint, direction = b.rank })
  busy(ctx, 1)
  local prop = optimizer.propose(ctx, parent, b, shared.hits, shared.history, shared.lessons)
  rd:write(dir .. "/opt_prompt.txt", prop.prompt)
  rd:write(dir .. "/opt_reply.txt", prop.reply or "")
  -- a reply that is textually a kernel already evaluated in this run (comments and blank lines
  -- aside) is a duplicate without spending a GPU job on it; the evaluator's fingerprint catches
  -- the rest after evaluation
  local src_fp = prop.code and fingerprint.of(prop.code)
  local v
  if src_fp and ctx.known_src[src_fp] then
    v = { ok = true, code = prop.code, result = ctx.known_src[src_fp], attempts = { {} }, skipped = true }
    rd:write(dir .. "/duplicate.json", { source_fingerprint = src_fp, evaluated = false,
      reason = "same source as a kernel already evaluated in this run" })
  else
    v = verifier.run(ctx, prop.code, { dir = dir, bottleneck = b, round = round, k = k })
    if v.ok then ctx.known_src[fingerprint.of(v.code)] = v.result end
  end
  local r = v.result or {}
  local code = v.code or ""
  rd:write(dir .. "/kernel.py", code)
  local a = {
    round = round, worker = k, skill = prop.skill or b.skill, code = code, tries = #v.attempts,
    bottleneck_text = optimizer.bottleneck_text(b), stage = r.stage, error = r.error,
    parent_ms = parent.result.time_ms and parent.result.time_ms.median,
  }
  local child
  if v.ok then
    local fp = r.fingerprint or fingerprint.of(code)
    a.outcome = v.skipped and "duplicate" or M.classify(ctx, parent, fp, r.time_ms)
    a.child_ms = r.time_ms and r.time_ms.median
    ctx.seq = ctx.seq + 1
    child = { id = string.format("r%dw%d", round, k), code = code, path = dir .. "/kernel.py",
      fingerprint = fp, result = r, time = r.time_ms, ok = true, seq = ctx.seq, round = round,
      worker = k, parent = parent.id, sol_pct = r.roofline and r.roofline.sol_pct }
    child.profile = require("agents.lib.metrics").summarize(r)
    a.profile = child.profile
    rd:write(dir .. "/optimized_ncu_metrics.json", rd.ncu_json(r, child.path, ctx.problem_path, round))
  else
    a.outcome = "failed"
    rd:write(dir .. "/optimized_ncu_metrics.json", rd.ncu_json(nil, dir .. "/kernel.py", ctx.problem_path, round))
  end
  local kname = string.format("kernel_round_%d_w%d", round, k)
  rd:write(dir .. "/benchmark_results.json", rd.benchmark_json(ctx.problem_path, ctx.device_name, ctx.dtype,
    { [kname] = { time_ms = a.child_ms or json.null, p10 = r.time_ms and r.time_ms.p10, p90 = r.time_ms and r.time_ms.p90,
      path = dir .. "/kernel.py", ok = v.ok, outcome = a.outcome, stage = r.stage, error = r.error,
      parent = parent.id, parent_ms = a.parent_ms } }))

  local attempt_id = ctx.mem:add_attempt({
    round = round, parent_id = parent.attempt_id, worker = k, role = "optimizer", strategy = ctx.strategy.name,
    skill = a.skill, plan_signature = (b.skill or "") .. ":" .. (b.summary or ""):sub(1, 80),
    prompt_path = dir .. "/opt_prompt.txt", reply_path = dir .. "/opt_reply.txt", source_path = dir .. "/kernel.py",
    source_hash = fingerprint.of(code), fingerprint = child and child.fingerprint, stage = a.outcome == "failed" and (r.stage or "failed") or a.outcome,
    error_signature = error_signature(r.error), correct = v.ok, time_ms = a.child_ms,
    speedup_vs_eager = ctx.eager_ms and a.child_ms and ctx.eager_ms / a.child_ms or nil,
    speedup_vs_compile = ctx.compile_ms and a.child_ms and ctx.compile_ms / a.child_ms or nil,
    metrics = child and child.profile or nil,
  })
  if child then child.attempt_id = attempt_id end

  local refl, rprompt, rreply = reflector.reflect(ctx, parent, a)
  rd:write(dir .. "/reflexion.txt", json.encode(refl, { pretty = true }) .. "\n")
  if rprompt then
    rd:write(dir .. "/reflexion_prompt.txt", rprompt)
    rd:write(dir .. "/reflexion_reply.txt", rreply or "")
  end
  ctx.mem:add_reflexion(attempt_id, refl, rreply)
  for _, l in ipairs(type(refl.lessons) == "table" and refl.lessons or {}) do
    ctx.mem:add_lesson(tostring(l), { a.skill or "none", a.outcome }, attempt_id)
  end
  ctx.mem:skill_outcome(a.skill, { bottleneck = b.category, op_class = shared.op_class, success = a.outcome == "improved",
    gain = a.parent_ms and a.child_ms and a.parent_ms / a.child_ms or nil, attempt_id = attempt_id })
  ctx.attempts[#ctx.attempts + 1] = { round = round, worker = k, outcome = a.outcome, skill = a.skill,
    time_ms = a.child_ms, stage = r.stage, error = r.error, tries = a.tries, parent = parent.id, attempt_id = attempt_id }
  log.info("round %d w%d (%s): %s%s", round, k, tostring(a.skill), a.outcome,
    a.child_ms and string.format(" %.4f ms (parent %.4f)", a.child_ms, a.parent_ms or 0) or (" " .. tostring(r.error)))
  busy(ctx, -1)
  if child and a.outcome ~= "duplicate" then return child end
  return nil
end

-- expand(ctx, parent, ks, round) -> children of one parent
function M.expand(ctx, parent, ks, round)
  busy(ctx, 1)
  profiler.ensure(ctx, parent)
  local feats = features.extract(parent.code, ctx.problem_code, ctx.dtype)
  local stats = ctx.mem:skill_stats(feats.op_class)
  local hits = skills_lib.retrieve(ctx.skills, parent.profile, feats, { limit = 6, stats = stats })
  local shared = { hits = hits, op_class = feats.op_class,
    history = ctx.mem:history_text(parent.attempt_id),
    lessons = ctx.mem:lessons_text(table.concat((function()
      local w = { feats.op_class }
      for _, h in ipairs(hits) do w[#w + 1] = h.skill.name end
      return w
    end)(), " ")) }
  local bns, prompt, reply = judge.diagnose(ctx, parent, #ks, hits, shared.history, shared.lessons)
  shared.prompt, shared.reply = prompt, reply
  busy(ctx, -1)
  if #bns < #ks then
    log.warn("round %d: %d distinct directions for %s, %d workers idle", round, #bns, parent.id, #ks - #bns)
  end
  local fns = {}
  for j = 1, math.min(#bns, #ks) do
    local b, k = bns[j], ks[j]
    fns[#fns + 1] = function() return M.worker(ctx, parent, b, shared, round, k) end
  end
  local out = {}
  for _, r in ipairs(task.all(fns)) do
    if r.ok then
      if r[1] then out[#out + 1] = r[1] end
    else
      log.error("worker failed: %s", tostring(r[1]))
    end
  end
  return out
end

-- run_round(ctx, beam, round) -> children (successful, distinct, not duplicates)
function M.run_round(ctx, beam, round)
  local parents = ctx.strategy.parents(beam, ctx.opts)
  local plans, k = {}, 0
  for _, p in ipairs(parents) do
    local ks = {}
    for _ = 1, ctx.strategy.directions(p, ctx.opts) do k = k + 1; ks[#ks + 1] = k end
    plans[#plans + 1] = { parent = p, ks = ks }
  end
  ctx.rd:round_dir(round)
  if ctx.progress then ctx.progress:update({ round = round, workers = k, busy = 0 }) end
  local fns = {}
  for _, pl in ipairs(plans) do
    fns[#fns + 1] = function() return M.expand(ctx, pl.parent, pl.ks, round) end
  end
  local children = {}
  for _, r in ipairs(task.all(fns)) do
    if r.ok then
      for _, c in ipairs(r[1] or {}) do children[#children + 1] = c end
    else
      log.error("parent expansion failed: %s", tostring(r[1]))
    end
  end
  return children
end

return M
