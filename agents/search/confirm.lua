-- Confirmation of what a run reports: the start kernel measured next to the baselines, the
-- speed-of-light figure an early stop relies on, and at the end the best kernel re-measured in a
-- fresh job next to the baselines (same method for all). The driver calls these; nothing is
-- ranked, archived or reported from a measurement that did not come back ok.
--
-- Baselines are measured once per problem and environment and kept in the memory database
-- (agents/search/measured.lua): a later job times eager only, and the cached torch.compile and
-- max-autotune figures stand when that eager median agrees with the cached one within 2%;
-- otherwise every baseline is measured again. Baselines missing from the cache (the start times
-- eager and torch.compile, the final confirmation max-autotune too) are measured beside the
-- re-check and join it. A result says which: `baselines_source` is "measured", "cached",
-- "completed" (cached, and the missing ones measured) or "remeasured" (the re-check disagreed;
-- `baselines_recheck` says how).
local log = require("kagent.log")
local ktime = require("kagent.time")
local measured = require("agents.search.measured")
local baselines = require("agents.lib.baselines")
local in_model = require("agents.lib.in_model")
local review = require("agents.search.review")
local verdict = require("agents.lib.verdict")
local attempt = require("agents.search.attempt")
local prefer_general = require("agents.search.prefer_general")

local M = {}


local function copy(t)
  local c = {}
  for k, v in pairs(t or {}) do c[k] = v end
  return c
end

-- timed_alone(run, op, code, extra, names) -> evaluator result of pool[op] (evaluate or benchmark)
-- on the job run.job(code, extra) with the baselines `names` beside it, cached ones reused as above.
local function timed_alone(run, op, code, extra, names)
  local function job(bnames)
    local e = copy(extra)
    e.bench = copy(e.bench)
    e.bench.baselines = bnames
    return run.job(code, e)
  end
  -- CPU mode measures them every time: wall-clock figures on a shared CPU vary by more than the
  -- re-check's 2%, so a cached figure would rarely stand and each re-check would cost a job
  local cached = run.can_profile and measured.baselines(run) or nil
  if measured.has(cached, { "eager" }) then
    local missing = measured.missing(cached, names)
    local asked = { "eager" }
    for _, n in ipairs(missing) do asked[#asked + 1] = n end
    local r = run.pool[op](run.pool, job(asked))
    if not r.ok then return r end  -- the kernel failed: its verdict needs no baselines
    local agree, why = measured.agrees(cached, r)
    if agree then
      -- eager is the re-check's own figure, measured beside the kernel, and so are the missing
      -- ones, which join the cache; the others are cached
      local rest = {}
      for _, n in ipairs(names) do
        if n ~= "eager" and not r[n .. "_ms"] then rest[#rest + 1] = n end
      end
      measured.fill(r, cached, rest)
      if #missing > 0 then measured.put_baselines(run, r, missing) end
      r.baselines_source = #missing > 0 and "completed" or "cached"
      return r
    end
    log.info("cached baselines not reused: %s; measuring them again", why)
    -- the baselines alone, beside the same kernel (cheap checks: its verdict is the job's above)
    local b = run.pool:benchmark(run.job(code, { bench = { baselines = names }, trials = 1, properties = false,
      audit = false, generalize = false, require_generalize = false, sanitize = false }))
    if b.ok and measured.has(b, names) then
      measured.fill(r, b, names)
      measured.put_baselines(run, b)
      r.baselines_source, r.baselines_recheck = "remeasured", why
      return r
    end
    log.warn("the baselines could not be measured on their own (%s); measuring them in the job again",
      tostring(b.error))
  end
  local r = run.pool[op](run.pool, job(names))
  if r.ok and run.can_profile then measured.put_baselines(run, r) end
  r.baselines_source = "measured"
  return r
end

-- timed(run, op, code, extra, names) -> timed_alone's result; with --objective in-model, judged in
-- the model too (agents/lib/in_model.lua): its time_ms is then the model's with the kernel in it
-- and its own figure is under .kernel, so the input, the finalists and the result are ranked and
-- reported as every candidate is (agents/run/init.lua, evaluate)
function M.timed(run, op, code, extra, names)
  local r = timed_alone(run, op, code, extra, names)
  if run.opts.objective == "in-model" then r = in_model.rank_by_model(run, code, r) end
  return r
end

-- with_baselines(run, code) -> evaluator result of a full evaluation timed next to the baselines
function M.with_baselines(run, code)
  return M.timed(run, "evaluate", code, nil, baselines.reported(run))
end

M.INPUT_TRIES = 3

-- input(run, code) -> the start kernel's evaluation next to the baselines. A timing the evaluator
-- could not trust (stage "timing": the machine was too noisy) is measured again, up to
-- INPUT_TRIES times, before the run gives up: every later comparison stands on this figure.
function M.input(run, code)
  local r
  for try = 1, M.INPUT_TRIES do
    r = M.with_baselines(run, code)
    if r.ok or r.stage ~= "timing" then return r end
    log.warn("the input kernel's timing was not trusted (try %d of %d): %s", try, M.INPUT_TRIES, tostring(r.error))
  end
  return r
end

local function retime(run, code)
  local r = run.pool:benchmark(run.job(code))
  if run.opts.objective == "in-model" then r = in_model.rank_by_model(run, code, r) end
  return r
end

-- sol(run, kernel) -> speed-of-light percent of a fresh measurement, or nil, why. Only a
-- figure that verified again and is physically possible (<= 100%) may end a search.
function M.sol(run, kernel)
  local r = retime(run, kernel.code)
  if not (r and r.ok) then return nil, "re-measure failed: " .. tostring(r and r.error) end
  local sol = r.roofline and r.roofline.sol_pct
  if type(sol) ~= "number" then return nil, "no roofline" end
  if sol > 100 then return nil, string.format("SOL %.1f%% is beyond the physical bound", sol) end
  return sol
end


-- rank_finalists(run, finalists) -> finalists ordered by one interleaved timing of them all
-- (pool:compare: the same inputs, blocks in A B ... B A order), fastest first; the search-time
-- order when there is one finalist or the comparison fails. Each gets .final_rank_ms.
function M.rank_finalists(run, finalists)
  local n = math.min(#finalists, math.max(1, run.opts.finalists or 3))
  local top = {}
  for i = 1, n do top[i] = finalists[i] end
  -- the interleaved comparison times kernels alone: ranked by the model, the search's order
  -- (by the in-model figures) stands
  if n < 2 or run.opts.objective == "in-model" then return finalists end
  local codes = {}
  for i, k in ipairs(top) do codes[i] = k.code end
  local res = run.pool:compare(run.job(nil, { candidates = codes }))
  if not res.ok then
    log.warn("interleaved re-measure of the finalists failed: %s", tostring(res.error))
    return finalists
  end
  for i, k in ipairs(top) do
    -- the whole figure too: agents/search/prefer_general.lua reads its noise
    k.final_rank_ms, k.final_rank_time = res.candidates[i].time_ms.median, res.candidates[i].time_ms
  end
  table.sort(top, function(a, b) return a.final_rank_ms < b.final_rank_ms end)
  for i = n + 1, #finalists do top[#top + 1] = finalists[i] end
  return top
end

-- final_extra(run) -> the confirmation job's fields: a fresh-process re-measure (the evaluator's
-- `confirm`), the problem resized to check that the kernel generalizes, and compute-sanitizer on
-- a GPU unless --sanitize none. Timed next to eager, torch.compile and max-autotune (M.timed).
function M.final_extra(run)
  local extra = { confirm = true, generalize = true, require_generalize = run.opts.require_generalize or nil }
  if M.sanitizes(run) then extra.sanitize = true end
  return extra
end

-- sanitizes(run) -> whether the final confirmation runs compute-sanitizer (on a GPU, unless
-- --sanitize none)
function M.sanitizes(run)
  return run.can_profile and (run.opts.sanitize or "final") ~= "none"
end

-- phase(run) -> the status line's name for the final confirmation
function M.phase(run)
  return M.sanitizes(run) and "confirmation + sanitizer" or "confirmation"
end

-- final_job(run, code) -> the whole confirmation job (baselines measured in it)
function M.final_job(run, code)
  local extra = M.final_extra(run)
  extra.bench = { baselines = baselines.all(run) }
  return run.job(code, extra)
end

-- A kernel is confirmed once per environment: the sanitizer's and the resized problem's verdicts
-- on a kernel that passed are kept in the memory database under its fingerprint (source and
-- compiled), the problem, dtype and environment (agents/search/measured.lua), and a later
-- confirmation of the same kernel reuses them instead of running those checks again. Its figure
-- is always measured again (the fresh-process `confirm` re-measure beside the baselines): a
-- figure belongs to the moment and the machine it was measured on, a verdict on the code does not.
local function kernel_fp(k)
  local cf = k.result and k.result.compiled_fingerprint
  return attempt.key(k) .. (type(cf) == "string" and ("|" .. cf) or "")
end

-- confirm_one(run, k) -> result, {wall_s, stage_s, reference_s, reused}: one finalist's
-- confirmation job, with the verdicts cached for it reused
local function confirm_one(run, k)
  local passed, why = review.check(run, k, "final")  -- --review: a refused kernel is never the result
  if not passed then return { ok = false, stage = "review", error = why }, { id = k.id, review = "refused" } end
  local extra = M.final_extra(run)
  local cached = measured.confirmation(run, k.code, kernel_fp(k))
  local reused = {}
  if cached then
    if extra.sanitize and type(cached.sanitizer) == "table" and cached.sanitizer.ok == true then
      extra.sanitize, reused[#reused + 1] = false, "sanitizer"
    end
    if extra.generalize and cached.generalizes == "yes" then
      extra.generalize, extra.require_generalize, reused[#reused + 1] = false, false, "generalizes"
    end
  end
  local t0 = ktime.now()
  local r = M.timed(run, "benchmark", k.code, extra, baselines.all(run))
  local phase = { id = k.id, wall_s = ktime.now() - t0, reference_s = r.reference_s, stage_s = r.stage_s,
    elapsed_s = r.elapsed, baselines = r.baselines_source, reused = reused }
  if r.ok then
    if #reused > 0 then
      for _, what in ipairs(reused) do r[what] = cached[what] end
      r.verdicts_source = "cached"
    end
    measured.put_confirmation(run, k.code, kernel_fp(k), r)
  end
  return r, phase
end

M.NOT_MEASURED_PASSES = 2

-- confirm_in_passes(run, ranked, out): confirms the finalists in order until one passes (out.kernel,
-- out.result, out.confirmed; each try in out.tried). A finalist judged "not measured" (ENOISY: the
-- machine was too noisy, nothing said of the kernel) is confirmed again after the others, up to
-- NOT_MEASURED_PASSES more times; out.not_measured where one still was after its last pass.
local function confirm_in_passes(run, ranked, out)
  local pending = ranked
  for pass = 0, M.NOT_MEASURED_PASSES do
    local again = {}
    for _, k in ipairs(pending) do
      local r, phase = confirm_one(run, k)
      out.phases.finalists[#out.phases.finalists + 1] = phase
      out.tried[#out.tried + 1] = { id = k.id, ok = r.ok == true, stage = r.stage, error = r.error,
        time_ms = r.time_ms and r.time_ms.median, interleaved_ms = k.final_rank_ms, pass = pass > 0 and pass or nil }
      if r.ok then
        out.kernel, out.result, out.confirmed, out.not_measured = k, r, true, nil
        return
      end
      if verdict.not_measured(r) then again[#again + 1] = k end
      log.warn("confirmation of %s failed at %s: %s", tostring(k.id), tostring(r.stage), tostring(r.error))
    end
    out.not_measured = #again > 0 or nil
    if #again == 0 then return end
    if pass < M.NOT_MEASURED_PASSES then
      log.info("%d finalist(s) not measured (the machine was too noisy): confirming again (%d of %d)",
        #again, pass + 1, M.NOT_MEASURED_PASSES)
    end
    pending = again
  end
end

-- final(run, finalists, input) -> {kernel, result, confirmed, input_ms, tried, phases}. finalists:
-- kernel records, best first. They are re-measured side by side, then the fastest whose
-- confirmation job passes is the run's result (a confirmation that fails, at any stage, moves on
-- to the next). When none passes there is no result: confirmed = false, no kernel and no figure,
-- only `tried` (each finalist's stage and error) — a figure that was not confirmed is not a
-- result (M.unconfirmed_line says so). The input is re-timed too, so speedup_vs_input compares
-- two measurements of one moment (input_time: that timing's summary). phases: where the confirmation's time went ({rank_s,
-- finalists = {{id, wall_s, reference_s, stage_s, elapsed_s, baselines, reused}}, input_s,
-- total_s}), for summary.json and tests/gpu/confirm_phases_gpu_check.sh.
function M.final(run, finalists, input)
  local t0 = ktime.now()
  local out = { tried = {}, phases = { finalists = {} } }
  local ranked = M.rank_finalists(run, review.finalists(run, finalists, out.tried))
  out.phases.rank_s = ktime.now() - t0
  confirm_in_passes(run, ranked, out)
  -- one that generalizes wins over one that does not within noise (agents/search/prefer_general.lua)
  prefer_general.prefer(ranked, out, function(k) return confirm_one(run, k) end)
  if not out.kernel then
    out.confirmed = false
    out.phases.total_s = ktime.now() - t0
    return out
  end
  out.input_ms = input.result.time_ms.median
  local t1 = ktime.now()
  if out.kernel == input then
    if out.confirmed then out.input_ms, out.input_time = out.result.time_ms.median, out.result.time_ms end
  else
    local again = retime(run, input.code)
    if again and again.ok and again.time_ms then out.input_ms, out.input_time = again.time_ms.median, again.time_ms end
  end
  out.phases.input_s = ktime.now() - t1
  out.phases.total_s = ktime.now() - t0
  return out
end

-- unconfirmed_line(tried, not_measured) -> the one line a run ends with when no finalist
-- confirmed: no figure, each finalist's stage and why. not_measured: a finalist was still "not
-- measured" (ENOISY) after its last pass, so the line says the machine, not the kernels, ended it
function M.unconfirmed_line(tried, not_measured)
  local why = {}
  for _, t in ipairs(tried or {}) do
    why[#why + 1] = string.format("%s at %s%s: %s", tostring(t.id), tostring(t.stage),
      t.pass and (" (pass " .. t.pass .. ")") or "", tostring(t.error):sub(1, 160))
  end
  local head = not_measured and "no confirmed kernel: not measured, the machine was too noisy to confirm a "
    .. "finalist (run again later): " or "no confirmed kernel: "
  return head .. (#why > 0 and table.concat(why, "; ") or "no finalist")
end

return M
