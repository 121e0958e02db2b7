-- The search driver: the one round loop of the agents, shared by every policy (docs/policies.md).
-- It owns the search state — beam, best, fingerprints seen, attempts, rounds without gain — and is
-- the only code that writes it; it resumes, runs rounds, applies the stop rules, saves state.json
-- after each round (agents/search/state.lua), confirms the result (confirm.lua) and writes
-- summary.json (summary.lua). A policy only chooses: parents,
-- directions, how a direction becomes a kernel (expand), what is kept, when to stop.
--
-- One round: parents(beam) -> directions(parent) for every parent in parallel -> one worker per
-- direction, all in parallel: expand -> outcome (fingerprint, promotion gate) -> reflect ->
-- attempt record -> keep(beam, children).
local log = require("kagent.log")
local task = require("kagent.task")
local ktime = require("kagent.time")
local fs = require("kagent.fs")
local attempt = require("agents.search.attempt")
local verdict = require("agents.lib.verdict")
local baselines = require("agents.lib.baselines")
local promotion = require("agents.search.promotion")
local confirm = require("agents.search.confirm")
local review = require("agents.search.review")
local state_file = require("agents.search.state")
local summary = require("agents.search.summary")
local rank = require("agents.lib.rank")
local expand = require("agents.search.expand")
local reflector = require("agents.roles.reflector")
local profiler = require("agents.roles.profiler")
local calls = require("agents.run.calls")

local M = {}

-- Stop rules ---------------------------------------------------------------------------------------

-- budget_stop(run) -> reason when the LLM budget is spent (always applied, whatever the policy)
function M.budget_stop(run)
  local o, u = run.opts, run.usage()
  if o.budget_usd and o.budget_usd > 0 and u.cost_usd >= o.budget_usd then
    return string.format("budget: $%.4f spent of $%.4f", u.cost_usd, o.budget_usd)
  end
  if o.budget_tokens and o.budget_tokens > 0 and u.tokens >= o.budget_tokens then
    return string.format("budget: %d tokens of %d", u.tokens, o.budget_tokens)
  end
end

-- default_stop(state, run) -> reason or nil: a plateau of --plateau rounds without a gain, or a
-- speed-of-light figure >= --sol-stop that a fresh measurement confirms (and that is <= 100%).
function M.default_stop(state, run)
  local o = run.opts
  if o.plateau and o.plateau > 0 and (state.rounds_without_gain or 0) >= o.plateau then
    return string.format("plateau: no gain beyond noise in %d rounds", state.rounds_without_gain)
  end
  local best = state.best
  if best and best.sol_pct and best.sol_pct >= o.sol_stop then
    local checked = state.sol_checked[best.id]
    if checked == nil then
      local sol, why = confirm.sol(run, best)
      checked = sol or false
      state.sol_checked[best.id] = checked
      if not sol then log.warn("SOL %.1f%% of %s not confirmed: %s", best.sol_pct, best.id, tostring(why)) end
    end
    if checked and checked >= o.sol_stop then
      return string.format("speed-of-light %.1f%% >= %g%% (confirmed)", checked, o.sol_stop)
    end
  end
end

-- stop_reason(run, pol, state): the budget, then the policy's stop(state, run, default) (default:
-- M.default_stop, which a policy may call so that it needs no import of the driver)
local function stop_reason(run, pol, state)
  local spent = M.budget_stop(run)
  if spent then return spent end
  if pol.stop then return pol.stop(state, run, M.default_stop) end
  return M.default_stop(state, run)
end

-- baseline_figures(run, r) -> {<name>_ms} of the reported baselines (the evaluator's
-- `reported_baselines`) that the input's result r timed
function M.baseline_figures(run, r)
  local out = {}
  for _, b in ipairs(baselines.reported(run)) do out[b .. "_ms"] = r[b .. "_ms"] end
  return out
end

-- start(run) -> state, or nil, why, llm_down: a fresh state whose input kernel (the --kernel,
-- the archived best, or a generated one) is evaluated next to the baselines. llm_down: the
-- kernel could not be generated because the LLM failed (not the problem's fault).
function M.start(run)
  local opts, code, label, granularity = run.opts, nil, run.opts.kernel, nil
  if opts.kernel then
    code = fs.read(opts.kernel)
    if not code then return nil, "cannot read kernel " .. opts.kernel end
  else
    local row = run.mem:best_archived(run.dtype)
    if row then code, label = row.source, "archived kernel #" .. tostring(row.id) end
  end
  if not code then
    if not run.llm then
      return nil, "no --kernel given and no archived kernel for this problem; generating one needs an LLM "
        .. "(set KAGENT_MODEL and its key), or pass --kernel"
    end
    local g, gerr, llm_down = require("agents.search.generate").run(run, opts.gen_workers)
    if not g then return nil, gerr, llm_down or run.llm_guard.down ~= nil end
    code, label = g.code, string.format("generated (worker %d, %d attempt(s))", g.worker, g.attempts)
    granularity = g.granularity
  end
  run.rd:write("problem.py", run.problem_code)
  run.rd:write("input_kernel.py", code)
  run.progress:update({ round = 0, phase = "baselines" })
  local t_in = ktime.now()
  local r = confirm.input(run, code)
  local baselines_s = ktime.now() - t_in
  run.progress:update({ phase = false })
  run.rd:write("input_eval.json", r)
  if not verdict.verified(r) then
    local ref = tostring(r.error):match("^EREFERENCE: (.*)$")
    if ref then
      -- the reference itself failed: the problem file is at fault, not the kernel
      return nil, string.format("the problem file %s fails on its own (%s)", run.problem_path,
        (ref:gsub("^the reference failed in ", "")))
    end
    if r.stage == "worker" and tostring(r.error):find("no reply in", 1, true) then
      -- the evaluator was killed mid-job: it cannot say whether the reference or the kernel hung
      return nil, string.format("the evaluator job of the input kernel was stopped (%s): the problem's own "
        .. "Model or the kernel hangs, or the job needs more than --job-timeout %s s", tostring(r.error),
        tostring(opts.job_timeout))
    end
    return nil, require("agents.search.input_failure").message(label or "(generated)", code, r)
  end
  local k = attempt.kernel({ id = "input", label = label, code = code, path = run.rd:path("input_kernel.py"),
    result = r, seq = 0, round = 0, granularity = granularity })
  k.attempt_id = attempt.store_kernel(run.mem, k, "input", opts.policy)
  return { round = 0, input = k, beam = { k }, best = k, known = M.known_of(k), seq = 0,
    baselines = M.baseline_figures(run, r), attempts = {}, rounds_without_gain = 0,
    sol_checked = {}, timing = { baselines_s = baselines_s, search_s = 0 } }
end

-- supersede(run, st) -> attempts marked: what an interrupted process did after the state it saved
-- last (the rounds after st.round; everything when the input was not measured yet) is redone, so
-- its attempts are marked superseded in memory and its round folders moved to superseded/<time>/,
-- and the database counts the attempts summary.json counts. What it evaluated up to st.round
-- (st.verified, saved in state.json) joins run.evaluate's cache: a source is evaluated once in a
-- run, and a redone round traces a duplicate as the first process did.
function M.supersede(run, st)
  local after = st and st.round or nil
  for key, result in pairs(st and st.verified or {}) do run.verified[key] = result end
  local stamp = os.date("!%Y%m%d-%H%M%S")
  local moved = 0
  for _, name in ipairs(fs.list(run.rd:path("rounds")) or {}) do
    local n = tonumber(name:match("^round_(%d+)$"))
    if n and n > (after or -1) then
      local dest = run.rd:path("superseded", stamp)
      fs.mkdir_p(dest)
      if os.rename(run.rd:path("rounds", name), fs.join(dest, name)) then moved = moved + 1 end
    end
  end
  local count = run.mem:supersede(after, moved > 0 and { from = run.rd:path("rounds"), to = run.rd:path("superseded", stamp) } or nil)
  if (count or 0) > 0 or moved > 0 then
    log.info("resume: %d attempt(s) of the interrupted %s marked superseded%s", count or 0,
      after and ("round " .. (after + 1)) or "start", moved > 0 and (" (trace in superseded/" .. stamp .. ")") or "")
  end
  return count or 0
end

local function show_best(run, st)
  local ms = st.best.result.time_ms.median
  local b = st.baselines
  run.progress:update({ best_ms = ms, sol_pct = st.best.sol_pct,
    speedup_eager = b.eager_ms and b.eager_ms / ms, speedup_compile = b.compile_ms and b.compile_ms / ms })
end

-- A round ---------------------------------------------------------------------------------------------

-- known_of(k[, known, id]) -> known (a new table when nil) with k's evaluator fingerprint and its
-- source hash, each in its own format (agents/search/attempt.lua), mapped to id (default k.id):
-- the run's table of kernels seen, which state.json keeps (a state saved before holds either)
function M.known_of(k, known, id)
  known = known or {}
  if k.fingerprint then known[k.fingerprint] = id or k.id end
  if k.source_hash then known[k.source_hash] = id or k.id end
  return known
end

-- outcome(run, st, parent, a): llm_error (an LLM call failed: nothing about the kernel), failed,
-- duplicate (its evaluator fingerprint or its source hash seen in the run, the parent's
-- included) or improved/same/slower by the promotion gate. The kernel is claimed before anything
-- can yield, so two workers of a round that write the same kernel cannot both count as new.
local function outcome(run, st, parent, a)
  if a.llm_error then a.outcome = "llm_error"; return end
  if not a.ok then a.outcome = "failed"; return end
  local parents = M.known_of(parent)
  local seen = parents[a.fingerprint or ""] or parents[a.source_hash] or st.known[a.fingerprint or ""]
    or st.known[a.source_hash]
  if seen then
    a.outcome, a.duplicate_of = "duplicate", seen
  else
    M.known_of(a, st.known, string.format("r%dw%d", a.round, a.worker))
  end
  a.gained, a.promotion = promotion.promote(run, parent, a)
  if a.outcome then
    -- the gate's verdict still credits the skill (attempt.store), but its text is the kernel it
    -- duplicates' win, not a new one: say which kernel this is
    a.promotion = string.format("duplicate of %s%s: the same kernel, no new result", seen == parent.id and "its parent " or "",
      seen)
    return
  end
  if a.gained then a.outcome = "improved"
  elseif rank.better(parent.result.time_ms, a.result.time_ms) then a.outcome = "slower"
  else a.outcome = "same" end
end

local function busy(run, st, d)
  st.busy = (st.busy or 0) + d
  run.progress:update({ busy = st.busy })
end

local function worker(run, pol, st, job)
  local w = { round = job.round, k = job.k, dir = run.rd:worker_dir(job.round, job.k) }
  calls.at({ round = job.round, parent = job.parent.fingerprint, worker = job.k })
  busy(run, st, 1)
  local ok, draft = pcall(pol.expand or expand.expand, job.parent, job.direction, run, w)
  if not ok then
    log.error("round %d w%d: expand failed: %s", w.round, w.k, tostring(draft))
    draft = { stage = "policy", error = "EPOLICY: " .. tostring(draft) }
  end
  local a = attempt.shape(run, job.parent, job.direction, draft, w)
  outcome(run, st, job.parent, a)
  a.policy, a.baselines = pol.name, st.baselines
  if not a.llm_error then
    a.reflexion, a.reflexion_prompt, a.reflexion_reply = reflector.reflect(run, job.parent, a)
  end
  local id, child = attempt.store(run, job.parent, job.direction, a, w)
  if child then
    st.seq = st.seq + 1
    child.seq = st.seq
  end
  st.attempts[#st.attempts + 1] = attempt.summary(a, id, job.parent)
  log.info("round %d w%d (%s): %s%s%s", w.round, w.k, tostring(a.skill), a.outcome,
    a.child_ms and string.format(" %.4f ms (parent %.4f)", a.child_ms, a.parent_ms or 0) or (" " .. tostring(a.error)),
    a.promotion and (": " .. tostring(a.promotion)) or "")
  busy(run, st, -1)
  return child
end

-- A kernel without counters is profiled once: candidates are timed without a profile
-- (run.evaluate), so a kept kernel is profiled when it enters the beam, and a parent whose
-- profile failed before its directions are chosen; the merged result replaces the kernel's
-- (state the driver owns). A candidate that loses the gate is never profiled.
local function ensure_profile(run, k)
  if k.profiled then return end
  local p = profiler.profile(run, k)
  k.profiled = true
  if p then k.result, k.profile = p, require("agents.lib.metrics").summarize(p) end
end

-- profile_kept(run, beam): the beam's kernels not profiled yet, profiled side by side
local function profile_kept(run, beam)
  local fns = {}
  for _, k in ipairs(beam) do
    if not k.profiled then fns[#fns + 1] = function() ensure_profile(run, k) end end
  end
  for _, res in ipairs(task.all(fns)) do
    if not res.ok then log.error("profile of a kept kernel failed: %s", tostring(res[1])) end
  end
end

-- round(run, pol, st, r) -> children (verified, new), reason when the policy had nothing to try
function M.round(run, pol, st, r)
  run.rd:round_dir(r)
  local parents = pol.parents(st.beam, run)
  run.progress:update({ round = r, workers = 0, busy = 0 })
  local plan = {}
  for i, p in ipairs(parents) do
    plan[i] = function()
      calls.at({ round = r, parent = p.fingerprint })
      ensure_profile(run, p)
      return pol.directions(p, run)
    end
  end
  local planned = task.all(plan)
  local jobs, notes = {}, {}
  for i, p in ipairs(parents) do
    local res = planned[i]
    if not res.ok then error("directions(" .. tostring(p.id) .. ") failed: " .. tostring(res[1]), 0) end
    local list, info = res[1] or {}, res[2]
    if info ~= nil then
      run.rd:write(string.format("rounds/round_%d/directions_%s.json", r, p.id), { parent = p.id, directions = #list, info = info })
      notes[#notes + 1] = type(info) == "string" and info or (type(info) == "table" and info.reason) or nil
    end
    for _, d in ipairs(list) do jobs[#jobs + 1] = { parent = p, direction = d, round = r, k = #jobs + 1 } end
  end
  if #jobs == 0 then
    return {}, #notes > 0 and table.concat(notes, "; ") or "the policy found nothing to try"
  end
  run.progress:update({ workers = #jobs })
  local fns = {}
  for i, job in ipairs(jobs) do fns[i] = function() return worker(run, pol, st, job) end end
  local children = {}
  for _, res in ipairs(task.all(fns)) do
    if res.ok then
      if res[1] then children[#children + 1] = res[1] end
    else
      log.error("worker failed: %s", tostring(res[1]))
    end
  end
  return children
end

-- update_best(run, st) -> true when the head of the beam replaces the best (promotion gate)
local function update_best(run, st)
  local top = st.beam[1]
  if top and top ~= st.best and promotion.promote(run, st.best, top) then
    st.best = top
    show_best(run, st)
    return true
  end
  return false
end

local function round_json(run, st, r, t0, u0, children)
  local u = run.usage()
  local beam = {}
  for i, k in ipairs(st.beam) do beam[i] = { id = k.id, time_ms = k.result.time_ms.median, fingerprint = k.fingerprint } end
  run.rd:write(string.format("rounds/round_%d/round.json", r), { round = r, wall_s = ktime.now() - t0,
    children = #children, beam = beam, best = st.best.id,
    tokens = { input = u.input_tokens - u0.input_tokens, output = u.output_tokens - u0.output_tokens,
      cache_read = u.cache_read_tokens - u0.cache_read_tokens, cache_write = u.cache_write_tokens - u0.cache_write_tokens,
      total = u.tokens - u0.tokens },
    llm_calls = u.calls - u0.calls, cost_usd = u.cost_usd - u0.cost_usd, run_tokens = u.tokens, run_cost_usd = u.cost_usd,
    llm_failures = run.llm_guard.failures - (u0.llm_failures or 0) })
end

-- search(run, pol, st) -> stop reason. Rounds st.round+1 .. --rounds. A round in which the LLM
-- went down (agents/run/llm_guard.lua) is not kept: the driver stops, and --resume redoes it.
function M.search(run, pol, st)
  show_best(run, st)
  st.timing = st.timing or { search_s = 0 }
  local t_search = ktime.now()
  local reason = st.stop_reason or stop_reason(run, pol, st)
  -- a failed write (agents/run/writes.lua), in a worker task or anywhere, stops the search after
  -- its round: that round is not kept, and the entry script ends the run (exit 6)
  local writes = require("agents.run.writes")
  for r = st.round + 1, run.opts.rounds do
    if reason or run.llm_guard.down or writes.failure(run) then break end
    local t0, u0 = ktime.now(), run.usage()
    u0.llm_failures = run.llm_guard.failures
    local children, none = M.round(run, pol, st, r)
    if run.llm_guard.down or writes.failure(run) then break end
    if none then reason = none; break end
    local kept = pol.keep(st.beam, children, run)
    if type(kept) ~= "table" or #kept == 0 then error("keep() must return a non-empty beam", 0) end
    st.beam = review.kept(run, kept)  -- --review all: a refused kernel leaves the beam
    profile_kept(run, st.beam)
    if update_best(run, st) then st.rounds_without_gain = 0 else st.rounds_without_gain = st.rounds_without_gain + 1 end
    st.round = r
    round_json(run, st, r, t0, u0, children)
    reason = stop_reason(run, pol, st)
    st.stop_reason = reason
    st.timing.search_s = (st.timing.search_s or 0) + (ktime.now() - t_search)
    t_search = ktime.now()
    state_file.save(run, st)
    summary.write_report(run, true)  -- the page of a running run, which reloads itself
  end
  st.timing.search_s = (st.timing.search_s or 0) + (ktime.now() - t_search)
  return reason
end

-- finish(run, st, reason) -> summary: the best kernel (or, when its fresh measurement fails, the
-- next finalist) confirmed next to the baselines, then summary.json
function M.finish(run, st, reason)
  run.progress:update({ busy = 0, workers = 0, phase = confirm.phase(run) })
  local finalists = { st.best }
  for _, k in ipairs(st.beam) do if k ~= st.best then finalists[#finalists + 1] = k end end
  local t0 = ktime.now()
  local fin = confirm.final(run, finalists, st.input)
  st.timing = st.timing or {}
  st.timing.confirm_s = ktime.now() - t0
  return summary.search(run, st, reason, fin)
end

return M
