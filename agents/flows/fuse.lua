-- The stages of agents/fuse.lua: route, then the chosen path — decompose (subgraphs proposed and
-- checked), generate (a kernel per distinct subgraph, sessions in parallel:
-- agents/flows/fuse_sessions.lua), compose (one program calling only those kernels, verified
-- against the model) — or direct (one program generated for the whole model); when the chosen
-- path fails, the other one. Each stage's wall time, tokens and cost go to summary.json.
--
-- Run directory: problem.py, fuse/analysis.json, fuse/route.json (+ route_prompt/reply.txt),
-- fuse/decompose_<i>_{prompt,reply}.txt and _refused.json, fuse/subgraphs.json, fuse/sg_<k>/
-- (problem.py, generate/..., best_kernel.py, verify.json, summary.json), compose/
-- (composed_kernel.py, verify.json, hot_path.json), generate/ (the direct path), best_kernel.py,
-- best_eval.json, summary.json.
local json = require("kagent.json")
local log = require("kagent.log")
local ktime = require("kagent.time")
local attempt = require("agents.search.attempt")
local baselines = require("agents.lib.baselines")
local verdict = require("agents.lib.verdict")
local decomposition = require("agents.lib.decomposition")
local generate = require("agents.search.generate")
local subproblem = require("agents.lib.subproblem")
local splitter = require("agents.flows.splitter")
local floor = require("agents.flows.floor")
local subrun = require("agents.flows.subrun")
local sessions = require("agents.flows.fuse_sessions")
local summary = require("agents.search.summary")
local exit = require("agents.run.exit")
local composer = require("agents.roles.composer")
local decomposer = require("agents.roles.decomposer")
local router = require("agents.roles.router")

local M = {}

-- stage(run, st, name, fn) -> fn's results; records the stage's wall time, tokens and cost
local function stage(run, st, name, fn)
  local t0, u0 = ktime.now(), run.usage()
  run.progress:update({ phase = name, workers = 0, busy = 0 })
  log.info("stage %s", name)
  local ok, a, b = pcall(fn)
  local u = run.usage()
  st.stages[name] = { wall_s = ktime.now() - t0, tokens = u.tokens - u0.tokens, input_tokens = u.input_tokens - u0.input_tokens,
    output_tokens = u.output_tokens - u0.output_tokens, llm_calls = u.calls - u0.calls, cost_usd = u.cost_usd - u0.cost_usd,
    ok = ok and a ~= nil and a ~= false }
  if not ok then error(a, 0) end
  if a == nil then st.stages[name].error = b end
  return a, b
end

-- strict(run) -> the run whose evaluator jobs audit with --own-share
local function strict(run)
  return subrun.derive(run, { job = sessions.audited(run.opts.own_share) })
end

-- Route ---------------------------------------------------------------------------------------------

local function route(run, st)
  local a = run.pool:analyze({ kind = "problem", problem = run.problem_path, dtype = run.dtype, timeout = run.opts.job_timeout })
  run.rd:write("fuse/analysis.json", a)
  if not a.ok and a.stage == "load" and tostring(a.error):match("^ERUN") then
    -- loading the problem and drawing its inputs run only its own code: the file is at fault
    st.problem_error = string.format("the problem file %s fails on its own (stage load: %s)", run.problem_path, a.error)
  end
  if not a.ok then
    log.warn("the static analysis failed: %s", tostring(a.error))
    a = { ok = false, traced = false, trace_error = "the analysis failed: " .. tostring(a.error) }
  end
  local force = run.opts.route ~= "auto" and run.opts.route or nil
  -- say where a forced route came from: --no-llm sets it when no --route was given (agents/fuse.lua)
  local given = run.opts._given and run.opts._given.route
  local why = force and run.opts.no_llm and not given
    and "--no-llm (no --route given): the LLM-free path is the splitter's decomposition" or nil
  local r = router.decide(run, a, { force = force, force_reason = why, vote = not run.opts.no_vote, cache = not run.opts.fresh })
  if r.vote then
    run.rd:write("fuse/route_prompt.txt", r.vote.prompt or "")
    run.rd:write("fuse/route_reply.txt", r.vote.reply or "")
    r.vote = { route = r.vote.route or json.null, reason = r.vote.reason or json.null, error = r.vote.error or json.null }
  end
  st.analysis, st.route = a, r
  run.rd:write("fuse/route.json", r)
  log.info("route: %s (%s): %s", r.path, r.decided_by, tostring(r.reason))
  return r
end

-- Decompose -------------------------------------------------------------------------------------------

-- decompose(run, st): the splitter's plan first (--decomposer auto|rules), checked as an LLM's is;
-- the LLM's decompositions when it is refused (auto, an LLM configured) or asked for (llm).
-- st.decomposed_by records which one and why.
local function decompose(run, st)
  local a, refusals = st.analysis, {}
  local how = run.opts.decomposer or "auto"
  if how ~= "llm" then
    local plan = a.decomposable and splitter.plan(a)
    if plan then run.rd:write("fuse/splitter_plan.json", plan) end
    local dec, why = splitter.decompose(a)
    if dec then
      st.refusals = refusals
      st.decomposed_by = { by = "splitter", reason = "the FX splitter's plan checked against the trace: " .. splitter.RULE }
      log.info("the splitter's decomposition accepted: %d subgraphs", #dec.subgraphs)
      return dec
    end
    run.rd:write("fuse/splitter_refused.json", { reasons = why })
    local text = "the splitter's decomposition was refused: " .. table.concat(why, "; ")
    st.decomposed_by = { by = "splitter", reason = text }
    if how == "rules" or not run.llm then
      st.refusals = refusals
      return nil, text
    end
    log.warn("%s; asking the LLM", text)
    st.decomposed_by = { by = "llm", reason = text }
  else
    st.decomposed_by = { by = "llm", reason = "--decomposer llm" }
  end
  for try = 1, math.max(1, run.opts.decompose_tries) do
    local p = decomposer.propose(run, a, refusals)
    local base = string.format("fuse/decompose_%d", try)
    run.rd:write(base .. "_prompt.txt", p.prompt)
    run.rd:write(base .. "_reply.txt", p.reply or "")
    if p.llm_failed then return nil, "the decomposition call failed: " .. p.error end
    local dec, why
    if p.plan then dec, why = decomposition.validate(a, p.plan) else why = { p.error } end
    if dec then
      log.info("decomposition %d accepted: %d subgraphs", try, #dec.subgraphs)
      st.refusals = refusals
      return dec
    end
    refusals[#refusals + 1] = { try = try, reasons = why }
    run.rd:write(base .. "_refused.json", { try = try, reasons = why })
    log.warn("decomposition %d refused before any generation:\n%s", try, decomposition.reasons_text(why))
  end
  st.refusals = refusals
  return nil, string.format("all %d decompositions were refused; the last: %s", #refusals,
    table.concat(refusals[#refusals].reasons, "; "))
end

-- The paths -------------------------------------------------------------------------------------------

-- compose_first(run, a, dec, firsts, dir, source) -> a first program composed in folder `dir`,
-- audited as its kernels were (sessions.first_share of their source)
local function compose_first(run, a, dec, firsts, dir, source)
  return composer.compose(subrun.derive(run, { dir = dir, job = sessions.audited(sessions.first_share(run, source)) }),
    a, dec, firsts)
end

local function decompose_path(run, st)
  local dec, why = stage(run, st, "decompose", function() return decompose(run, st) end)
  if not dec then return nil, why end
  local unique = subproblem.dedupe(st.analysis, dec, run.problem_path)
  st.dec, st.unique = dec, unique
  local dj = decomposition.to_json(dec)
  dj.unique = {}
  for i, u in ipairs(unique) do dj.unique[i] = { dir = u.dir, signature = u.signature, occurrences = u.occurrences } end
  dj.refused = #st.refusals > 0 and st.refusals or json.empty_array
  run.rd:write("fuse/subgraphs.json", dj)
  log.info("%d subgraphs, %d distinct: generating their kernels in parallel", #dec.subgraphs, #unique)
  local ok, gerr = stage(run, st, "generate", function() return sessions.generate_all(run, st, unique) end)
  -- with an LLM, a subgraph without a kernel sends the run to the other path (or, the LLM down,
  -- ends it); without one, the floor's whole-problem programs may still stand
  if not ok and run.llm then return nil, gerr end
  -- the first program (every subgraph's first kernel) is composed on its own: the LLM-free result,
  -- and what an LLM's kernels must beat; the floor (agents/flows/floor.lua) keeps the faster of it
  -- and the whole-problem programs
  local firsts, same, src = {}, true, "inductor"
  for _, u in ipairs(unique) do
    if u.first then firsts[#firsts + 1] = { k = u.k, dir = u.dir, kernel_code = u.first.code } end
    if u.first and u.first.source == "reference" then src = "reference" end
    if not (u.first and u.first.code == u.kernel_code) then same = false end
  end
  local split_fp, fp
  if run.opts.first ~= "none" then
    stage(run, st, "first_program", function()
      if #firsts == #unique then split_fp = compose_first(run, st.analysis, dec, firsts, "first", src) end
      fp = floor.choose(run, st, split_fp, { first = sessions.first, compose = function(view, a, d, u, dir)
        return compose_first(view, a, d, u, dir, "inductor")
      end })
      st.first_program = fp
      if not fp then return nil, "no first program" end
      if not fp.ok then return nil, fp.error end
      return true
    end)
  end
  if not ok then
    if fp and fp.ok then
      log.warn("%s; the floor's %s program stands", tostring(gerr), tostring(fp.floor_source))
      return { code = fp.code, result = fp.result, source = fp.path_rel, proof = fp.proof, first = true }
    end
    return nil, gerr
  end
  local c = same and split_fp or nil
  if not same then
    local composed, cerr = stage(run, st, "compose", function()
      c = composer.compose(strict(run), st.analysis, dec, unique)
      st.compose = c
      if not c.ok then return nil, c.error end
      return true
    end)
    if not composed then c = nil; st.compose_error = cerr end
  end
  local best = (fp and fp.ok) and fp or nil
  if c and c.ok and (not best or c.result.time_ms.median < best.result.time_ms.median) then best = c end
  if best and fp and best == fp and not same and c and c.ok then
    log.info("the LLM-free first program (%.4f ms) is faster than the LLM kernels' (%.4f ms): kept",
      fp.result.time_ms.median, c.result.time_ms.median)
  end
  if not best then
    return nil, (c and c.error) or st.compose_error or (fp and fp.error) or "no composed program"
  end
  st.compose = st.compose or best
  return { code = best.code, result = best.result, source = best == fp and fp.path_rel or "compose/composed_kernel.py",
    proof = best.proof, first = best == fp }
end

local function direct_path(run, st)
  return stage(run, st, "direct", function()
    local view = strict(run)
    local g, gerr = generate.run(view, run.opts.gen_workers)
    if not g then return nil, gerr end
    local r = view.pool:evaluate(view.job(g.code, { bench = { baselines = baselines.reported(view) } }))
    if not verdict.verified(r) then
      log.warn("the generated program's timed run next to the baselines failed (%s): its verified result stands", tostring(r.error))
      r = g.result
    end
    return { code = g.code, result = r, source = string.format("generate/w%d", g.worker), worker = g.worker, attempts = g.attempts }
  end)
end

-- Finish ----------------------------------------------------------------------------------------------

local function finish(run, st, best, failures)
  local r = st.route
  local s = summary.base(run)
  -- a run that ended without a program is a result of its own (a sweep's row says why), unless the
  -- LLM stopped answering: then it is a failure to run again
  if not best then s.status, s.error = run.llm_guard.down and "failed" or "no_program", table.concat(failures, "; ") end
  s.route = { path = r.path, decided_by = r.decided_by, reason = r.reason or json.null, cached_from = r.cached_from or json.null,
    static = r.static, vote = r.vote or json.null, fallback = r.fallback or json.null, final = r.final or json.null }
  s.stages = st.stages
  s.verified = best ~= nil
  s.refused_decompositions = #(st.refusals or {})
  if st.dec then
    s.subgraphs = { count = #st.dec.subgraphs, distinct = #st.unique,
      kernels = st.sessions and #st.sessions > 0 and st.sessions or json.empty_array }
  end
  s.decomposition = st.decomposed_by or json.null
  s.first_program = M.first_row(run, st)
  if st.compose then
    s.compose = { ok = st.compose.ok, path = "compose/composed_kernel.py", proof = st.compose.proof, error = st.compose.error or json.null }
  end
  if best then
    local res = best.result
    local t = res.time_ms.median
    run.rd:write("best_kernel.py", best.code)
    run.rd:write("best_eval.json", res)
    s.path, s.best = r.final, { path = "best_kernel.py", from = best.source }
    s.best_ms, s.best_time = t, res.time_ms
    -- the baselines its job timed (direct_path, compose)
    summary.add_baselines(s, res, baselines.reported(run), t)
    s.sol_pct = res.roofline and res.roofline.sol_pct or json.null
    s.next = string.format("kagent-rt agents/beam.lua --problem %s --kernel %s --dtype %s", run.problem_path,
      run.rd:path("best_kernel.py"), run.dtype)
    local k = attempt.kernel({ id = "fused", code = best.code, path = run.rd:path("best_kernel.py"), result = res })
    k.attempt_id = attempt.store_kernel(run.mem, k, r.final == "decompose" and "compose" or "generate", "fuse")
    -- archived once timed next to both baselines: beam.lua --problem P then starts from it
    if res.eager_ms then run.mem:archive(k, run.dtype) end
  end
  s.wall_s = ktime.now() - run.t0
  run.rd:write("summary.json", s)
  run.mem:finish(best and "done" or "failed", s)
  return s
end

-- first_row(run, st) -> what became of the LLM-free first program: {verified, stage, reason,
-- time_ms, eager_ms, compile_ms, compile_max_autotune_ms, baseline_errors, speedup_vs_eager,
-- speedup_vs_compile, own_time_frac, kernels = {{dir, source, label, verified, time_ms, error,
-- passed_over, untimed}} (the split's), source (the floor's candidate kept: split, whole,
-- max-autotune), candidates (floor.choose's)}
-- (docs/sweeps.md)
function M.first_row(run, st)
  if run.opts.first == "none" then return json.null end
  local row = { verified = false, kernels = {} }
  for i, o in ipairs(st.sessions or {}) do
    local f = o.first or {}
    row.kernels[i] = { dir = o.dir, source = f.source or json.null, label = f.label or json.null,
      verified = f.verified == true, time_ms = f.time_ms or json.null, error = f.error or json.null,
      own_time_frac = f.own_time_frac or json.null, passed_over = f.passed_over or json.null,
      untimed = f.untimed or json.null }
  end
  if #row.kernels == 0 then row.kernels = json.empty_array end
  local fp = st.first_program
  -- which candidate program the floor kept, and what became of each (agents/flows/floor.lua)
  if st.floor then row.source, row.candidates = st.floor.source, st.floor.candidates end
  if not st.dec then
    row.stage, row.reason = "decompose", st.stages.decompose and st.stages.decompose.error or "not decomposed"
  elseif not fp then
    local bad = {}
    for _, k in ipairs(row.kernels) do
      if not k.verified then bad[#bad + 1] = k.dir .. ": " .. tostring(k.error) end
    end
    row.stage, row.reason = "first kernel", #bad > 0 and table.concat(bad, "; ") or "no kernel"
  elseif not fp.ok then
    row.stage, row.reason = "compose", tostring(fp.error)
  else
    local r = fp.result
    local audit = type(r.audit) == "table" and r.audit or {}
    row.verified, row.time_ms = true, r.time_ms.median
    row.path = fp.path_rel or "first/compose/composed_kernel.py"
    row.eager_ms, row.compile_ms = r.eager_ms or json.null, r.compile_ms or json.null
    row.compile_max_autotune_ms = r.compile_max_autotune_ms or json.null
    -- why a baseline has no figure ({compile = "ERUN: ..."}): a missing ratio says why
    row.baseline_errors = type(r.baseline_errors) == "table" and next(r.baseline_errors) and r.baseline_errors or json.null
    row.speedup_vs_eager = r.eager_ms and r.eager_ms / r.time_ms.median or json.null
    row.speedup_vs_compile = r.compile_ms and r.compile_ms / r.time_ms.median or json.null
    row.own_time_frac = audit.applicable and audit.own_time_frac or json.null
    row.audit = fp.proof and fp.proof.audit or json.null
    row.hot_path = fp.proof and fp.proof.hot_path or json.null
  end
  return row
end

-- run(run) -> exit code (agents/run/exit.lua): 0 with a verified program, 1 when neither path gave
-- one, 3 when the LLM stopped answering (then the other path is not tried: it needs the LLM too),
-- 2 where that was the provider refusing the key or where the problem file fails on its own, 4
-- where a strict replay met unrecorded calls
function M.run(run)
  local st = { stages = {} }
  run.rd:write("problem.py", run.problem_code)
  local guard = run.llm_guard
  local r = stage(run, st, "route", function() return route(run, st) end)
  if st.problem_error then
    io.stderr:write(run.prog .. ": " .. st.problem_error .. "\n")
    summary.failed(run, st.problem_error)
    return exit.EXIT.input
  end
  local paths = { r.path, r.path == "direct" and "decompose" or "direct" }
  local best, failures = nil, {}
  for i, path in ipairs(paths) do
    if path == "decompose" and not st.analysis.decomposable then
      failures[#failures + 1] = "decompose: not possible (" .. tostring(r.static.reasons[1] or "the graph cannot be split") .. ")"
    elseif path == "direct" and not run.llm then
      failures[#failures + 1] = "direct: needs an LLM (--no-llm)"
    else
      if i == 2 then
        r.fallback = { from = paths[1], to = path, reason = failures[#failures] }
        log.warn("the %s path failed; falling back to the %s path", paths[1], path)
      end
      local got, why = (path == "decompose" and decompose_path or direct_path)(run, st)
      if got then
        best, r.final = got, path
        break
      end
      failures[#failures + 1] = path .. ": " .. tostring(why)
      log.warn("the %s path failed: %s", path, tostring(why))
      -- the other path needs the LLM too: once it is down there is nothing to fall back on
      if guard.down then break end
    end
  end
  r.failures = #failures > 0 and failures or nil
  run.rd:write("fuse/route.json", r)
  local s = finish(run, st, best, failures)
  -- no result without the files that hold it and the rows that record it (agents/run/writes.lua)
  if not summary.final_files_written(run, best and { "best_kernel.py", "summary.json" } or { "summary.json" }) then
    summary.failed(run, require("agents.run.writes").failure(run))
    return exit.write_failed_status(run.prog, run)
  end
  if not best then
    run.progress:finish(string.format("run %s: no verified program.\n  %s\n  %s", run.rd.id,
      table.concat(failures, "\n  "), run.rd.dir))
    if guard.down then return exit.llm_down_status(run.prog, guard) end
    return exit.replay_status(run.prog, s, exit.EXIT.error)
  end
  local b = s.baselines
  run.progress:finish(string.format("run %s: a verified program on the %s path%s: %.4f ms%s%s\n  %s\n  next: %s",
    run.rd.id, r.final, r.fallback and " (fallback)" or "", s.best_ms,
    b.eager_ms ~= json.null and string.format(", %.2fx eager", b.eager_ms / s.best_ms) or "",
    b.compile_ms ~= json.null and string.format(", %.2fx torch.compile", b.compile_ms / s.best_ms) or "",
    run.rd:path("best_kernel.py"), s.next))
  return exit.replay_status(run.prog, s, exit.EXIT.done)
end

return M
