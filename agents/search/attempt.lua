-- The attempt record: the one place where an attempt is shaped, traced into the run directory
-- and stored in memory, for every policy. The driver (agents/search/driver.lua) calls shape() on
-- what a policy's expand() returned, decides the outcome, has it reflected on, then store().
-- Kernel records (the input, children in the beam) are made here too.
local json = require("kagent.json")
local fingerprint = require("agents.lib.fingerprint")
local metrics = require("agents.lib.metrics")
local direction = require("agents.lib.direction")
local verdict = require("agents.lib.verdict")

local M = {}

-- A kernel (and a verified attempt) carries two hashes, each always in its own format:
--   fingerprint   the evaluator's: the AST hash of the source, 16 hex digits
--                 (src/gpu/eval/kagent_eval/common/fingerprint.py); nil when the evaluator gave none
--   source_hash   the agents' own: "src:" and 64 hex digits of the normalized source
--                 (agents/lib/fingerprint.lua), always there
-- key(k) is what a table of kernels is keyed by.

-- evaluator_fingerprint(f, r) -> the record's evaluator fingerprint: its own, else its result's.
-- A record saved before the two were apart (state.json) may hold the source hash under
-- `fingerprint`: that is no evaluator fingerprint, so the result's is taken.
local function evaluator_fingerprint(f, r)
  local fp = f.fingerprint
  if type(fp) == "string" and fp:sub(1, 4) ~= "src:" then return fp end
  return type(r) == "table" and type(r.fingerprint) == "string" and r.fingerprint or nil
end

-- key(k) -> the one key a kernel is known by in a table or cache: the evaluator's fingerprint
-- when it gave one (so a reformatted kernel is the same kernel), else the source hash
function M.key(k)
  return k.fingerprint or k.source_hash or fingerprint.of(k.code)
end

-- kernel{id, label, code, path, result, round, worker, parent, attempt_id} -> kernel record.
-- result must be a verified evaluator result with a median time.
function M.kernel(f)
  local r = f.result
  f.time = r.time_ms
  f.fingerprint = evaluator_fingerprint(f, r)
  f.source_hash = fingerprint.of(f.code)
  f.sol_pct = r.roofline and r.roofline.sol_pct
  f.profile = metrics.summarize(r)
  f.ok = true
  return f
end

-- store_kernel(mem, k, role, strategy) -> attempt id: the memory row of a kernel that did not come
-- from a round (the search's input, a generated or fused kernel, a fused program's subgraph),
-- stored as done and correct with its timing and profile (k: a kernel record, M.kernel).
function M.store_kernel(mem, k, role, strategy)
  local r = k.result
  return mem:add_attempt({ round = 0, role = role, strategy = strategy, source_path = k.path,
    source_hash = k.source_hash, fingerprint = k.fingerprint, stage = "done", correct = true,
    time_ms = r.time_ms.median, speedup_vs_eager = r.speedup_vs_eager, speedup_vs_compile = r.speedup_vs_compile,
    metrics = k.profile })
end

-- shape(run, parent, d, draft, w) -> attempt. draft is what expand() returned: {code, result,
-- tries, chain, cached, role, skill, prompt_path, reply_path, stage, error, llm_code}; a draft
-- without a result failed before evaluation (its stage says where: "llm", "reply", "policy").
-- A draft whose LLM call failed (llm_code, or stage "llm") and that has no verified kernel is an
-- LLM failure, not a kernel's: a.llm_error is set, with the code and the LLM's error (stage
-- "replay" when the code is EREPLAY, "llm" otherwise).
function M.shape(run, parent, d, draft, w)
  draft = draft or {}
  local r = draft.result
  local llm_failed = (draft.llm_code ~= nil or draft.stage == "llm") and not verdict.verified(r)
  local llm_code
  if llm_failed then
    local err = draft.llm_error or draft.error or "the LLM call failed"
    llm_code = draft.llm_code or verdict.error_signature(err)
    -- a question a strict replay had no recorded answer to is its own stage (docs/reports.md)
    r = { ok = false, stage = llm_code == "EREPLAY" and "replay" or "llm", error = err,
      kernel_error = type(r) == "table" and r.error or nil }
  elseif type(r) ~= "table" then
    r = { ok = false, stage = draft.stage or "reply", error = draft.error or "no kernel was produced" }
  elseif r.ok and not verdict.verified(r) then
    r = { ok = false, stage = "benchmark", error = "ENOTIME: verified but not timed" }
  end
  local a = {
    round = w.round, worker = w.k, dir = w.dir, role = draft.role or d.role or "optimizer",
    skill = draft.skill or d.skill, plan_signature = direction.signature(d), direction = d,
    code = draft.code or "", result = r, ok = r.ok == true, stage = r.stage, error = r.error,
    tries = draft.tries or 1, chain = draft.chain or {}, cached = draft.cached,
    prompt_path = draft.prompt_path, reply_path = draft.reply_path, model = draft.model,
    parent_ms = parent.result and parent.result.time_ms and parent.result.time_ms.median,
    bottleneck_text = direction.text(d), lesson = d.lesson,
    llm_error = llm_failed or nil, llm_code = llm_code,
  }
  if a.ok then
    a.child_ms = r.time_ms.median
    a.fingerprint, a.source_hash = evaluator_fingerprint({}, r), fingerprint.of(a.code)
    a.profile = metrics.summarize(r)
  end
  return a
end

local function write_trace(run, parent, d, a)
  local rd, dir = run.rd, a.dir
  rd:write(dir .. "/parent.json", { parent = parent.id, parent_fingerprint = parent.fingerprint, direction = d.rank })
  rd:write(dir .. "/input_ncu_metrics.json", rd.ncu_json(parent.result, parent.path, run.problem_path, a.round))
  rd:write(dir .. "/strategy.json", direction.strategy(d))
  for name, text in pairs(d.trace or {}) do rd:write(dir .. "/" .. name, text) end
  rd:write(dir .. "/kernel.py", a.code)
  rd:write(dir .. "/optimized_ncu_metrics.json", rd.ncu_json(a.ok and a.result or nil, dir .. "/kernel.py", run.problem_path, a.round))
  local t = a.result.time_ms or {}
  -- KernelAgent's key (one kernel per round's folder); the worker is in the folder name and here
  rd:write(dir .. "/benchmark_results.json", rd.benchmark_json(run.problem_path, run.device_name, run.dtype,
    { [string.format("kernel_round_%d", a.round)] = { time_ms = a.child_ms or json.null, worker = a.worker,
      p10 = t.p10, p90 = t.p90, path = dir .. "/kernel.py", ok = a.ok, outcome = a.outcome, stage = a.stage,
      error = a.error, promotion = a.promotion, parent = parent.id, parent_ms = a.parent_ms } }, { ["repeat"] = t.n }))
  if a.cached then
    rd:write(dir .. "/duplicate.json", { source_fingerprint = fingerprint.of(a.code), evaluated = false,
      reason = "same source as a kernel already evaluated in this run" })
  end
  if a.llm_error then return end  -- nothing to reflect on
  local refl = a.reflexion or {}
  rd:write(dir .. "/reflexion.txt", json.encode(refl, { pretty = true }) .. "\n")
  if a.reflexion_prompt then
    rd:write(dir .. "/reflexion_prompt.txt", a.reflexion_prompt)
    rd:write(dir .. "/reflexion_reply.txt", a.reflexion_reply or "")
  end
end

-- A lesson is verified when its attempt was measured and the reflexion's verdict on the fix
-- agrees with the measurement; later prompts prefer verified lessons of the same op class and
-- bottleneck class.
local function lesson_tags(run, a, bottleneck)
  local fe = a.reflexion and a.reflexion.was_fix_effective
  local verified = a.ok and (type(fe) ~= "boolean" or fe == (a.gained == true))
  local tags = { a.skill or "none", a.outcome, "op_" .. tostring(run.op_class) }
  if bottleneck then tags[#tags + 1] = "bn_" .. bottleneck end
  if verified then tags[#tags + 1] = "verified" end
  return tags
end

-- An LLM failure leaves one attempt row (stage llm_error, the code as its error signature) and
-- nothing learned: no repair rows, reflexion, lesson or skill outcome.
local function store_llm_error(run, parent, a)
  return run.mem:add_attempt({ round = a.round, parent_id = parent.attempt_id, worker = a.worker, role = a.role,
    strategy = a.policy, skill = a.skill, plan_signature = a.plan_signature, prompt_path = a.prompt_path,
    reply_path = a.reply_path, stage = "llm_error", error_signature = a.llm_code })
end

local function store_memory(run, parent, d, a)
  local mem = run.mem
  local eager, compile = a.baselines and a.baselines.eager_ms, a.baselines and a.baselines.compile_ms
  local id = mem:add_attempt({
    round = a.round, parent_id = parent.attempt_id, worker = a.worker, role = a.role, strategy = a.policy,
    skill = a.skill, plan_signature = a.plan_signature, prompt_path = a.prompt_path, reply_path = a.reply_path,
    source_path = a.dir .. "/kernel.py", source_hash = fingerprint.of(a.code), fingerprint = a.fingerprint,
    stage = a.ok and a.outcome or (a.stage or "failed"), error_signature = verdict.error_signature(a.error),
    correct = a.ok, time_ms = a.child_ms,
    speedup_vs_eager = eager and a.child_ms and eager / a.child_ms or nil,
    speedup_vs_compile = compile and a.child_ms and compile / a.child_ms or nil,
    metrics = a.profile,
  })
  -- the repair chain: one row per repaired try, under the attempt, so later prompts can show
  -- what was already diagnosed and patched
  for i, step in ipairs(a.chain) do
    mem:add_attempt({ round = a.round, parent_id = id, worker = a.worker, role = "repair", strategy = a.policy,
      skill = a.skill, plan_signature = "repair " .. i .. ": " .. tostring(step.diagnosis or ""):sub(1, 160),
      prompt_path = step.prompt_path, reply_path = step.reply_path, source_path = step.source_path,
      stage = step.stage, error_signature = verdict.error_signature(step.error), correct = false })
  end
  local refl = a.reflexion or {}
  mem:add_reflexion(id, refl, a.reflexion_reply)
  local bottleneck = d.bucket or d.category
  local tags = lesson_tags(run, a, bottleneck)
  for _, l in ipairs(type(refl.lessons) == "table" and refl.lessons or {}) do
    mem:add_lesson(tostring(l), tags, id)
  end
  -- the skill's record: a kernel that beats its parent is a success of the skill even when
  -- another worker found the same kernel first (a duplicate of a winner)
  mem:skill_outcome(a.skill, { bottleneck = bottleneck, op_class = run.op_class, success = a.gained == true,
    gain = a.parent_ms and a.child_ms and a.parent_ms / a.child_ms or nil, attempt_id = id })
  return id
end

-- store(run, parent, d, a) -> attempt_id, child kernel record (nil unless verified and new).
-- a carries outcome, gained, reflexion (+ prompt, reply), policy and baselines set by the driver.
function M.store(run, parent, d, a)
  write_trace(run, parent, d, a)
  local id = a.llm_error and store_llm_error(run, parent, a) or store_memory(run, parent, d, a)
  if not a.ok or a.outcome == "duplicate" then return id, nil end
  return id, M.kernel({ id = string.format("r%dw%d", a.round, a.worker), code = a.code, path = a.dir .. "/kernel.py",
    result = a.result, fingerprint = a.fingerprint, round = a.round, worker = a.worker, parent = parent.id,
    attempt_id = id })
end

-- summary(a, id, parent) -> the row the driver keeps per attempt (state.json, summary.json
-- outcomes, report.html): outcome, time with its spread, the parent's time, the bottleneck, and
-- the promotion gate's reason (why a verified kernel was improved, same or slower).
function M.summary(a, id, parent)
  local t = a.ok and a.result.time_ms or {}
  local bottleneck = a.direction and a.direction.summary
  return { round = a.round, worker = a.worker, outcome = a.outcome, skill = a.skill, time_ms = a.child_ms,
    p10 = t.p10, p90 = t.p90, parent_ms = a.parent_ms, stage = a.stage, error = a.error, llm_code = a.llm_code,
    tries = a.tries, parent = parent.id, attempt_id = id, duplicate_of = a.duplicate_of, gained = a.gained == true or nil,
    promotion = a.promotion and tostring(a.promotion):sub(1, 600) or nil,
    bottleneck = bottleneck and tostring(bottleneck):sub(1, 200) or nil, role = a.role, model = a.model }
end

return M
