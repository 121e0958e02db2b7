-- The stages of agents/fuse.lua: route, then the chosen path — decompose (subgraphs proposed and
-- checked), generate (a kernel per distinct subgraph, sessions in parallel), compose (one program
-- calling only those kernels, verified against the model) — or direct (one program generated
-- for the whole model); when the chosen path fails, the other one. Each stage's wall time,
-- tokens and cost go to summary.json.
--
-- Run directory: problem.py, fuse/analysis.json, fuse/route.json (+ route_prompt/reply.txt),
-- fuse/decompose_<i>_{prompt,reply}.txt and _refused.json, fuse/subgraphs.json, fuse/sg_<k>/
-- (problem.py, generate/..., best_kernel.py, verify.json, summary.json), compose/
-- (composed_kernel.py, verify.json, hot_path.json), generate/ (the direct path), best_kernel.py,
-- best_eval.json, summary.json.
local json = require("kagent.json")
local log = require("kagent.log")
local task = require("kagent.task")
local ktime = require("kagent.time")
local attempt = require("agents.lib.attempt")
local confirm = require("agents.lib.confirm")
local decomposition = require("agents.lib.decomposition")
local fingerprint = require("agents.lib.fingerprint")
local generate = require("agents.lib.generate")
local memory = require("agents.lib.memory")
local subproblem = require("agents.lib.subproblem")
local subrun = require("agents.lib.subrun")
local summary = require("agents.lib.summary")
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

-- audited(share) -> what every evaluator job of a fuse run gets: the kernel audit's threshold
local function audited(share)
  return function(j) j.fallback_threshold = share; return j end
end

-- strict(run) -> the run whose evaluator jobs audit with --own-share
local function strict(run)
  return subrun.derive(run, { job = audited(run.opts.own_share) })
end

-- Route ---------------------------------------------------------------------------------------------

local function route(run, st)
  local a = run.pool:analyze({ kind = "problem", problem = run.problem_path, dtype = run.dtype, timeout = run.opts.job_timeout })
  run.rd:write("fuse/analysis.json", a)
  if not a.ok then
    log.warn("the static analysis failed: %s", tostring(a.error))
    a = { ok = false, traced = false, trace_error = "the analysis failed: " .. tostring(a.error) }
  end
  local force = run.opts.route ~= "auto" and run.opts.route or nil
  local r = router.decide(run, a, { force = force, vote = not run.opts.no_vote, cache = not run.opts.fresh })
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

local function decompose(run, st)
  local a, refusals = st.analysis, {}
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

-- Generate: one session per distinct subgraph, all in parallel ----------------------------------------

local function session(run, u, progress)
  local t0 = ktime.now()
  local dir = "fuse/" .. u.dir
  local path = run.rd:path(dir .. "/problem.py")
  run.rd:write(path, u.code)
  memory.adopt_legacy_hashes(run.db, u.code)
  local mem = memory.open(run.db, { problem = path, problem_hash = fingerprint.hash(u.code), gpu = run.mem.info.gpu,
    policy = "fuse-subgraph", config = { fuse_run = run.mem.run_id, subgraph = u.dir, dtype = run.dtype } })
  local sub = subrun.derive(run, { problem_path = path, problem_code = u.code, dir = dir, mem = mem, progress = progress,
    job = audited(run.opts.own_share) })
  local out = { dir = u.dir, occurrences = u.occurrences, signature = u.signature }
  local code, result
  -- a kernel verified on this very subgraph in an earlier run is checked again and reused
  local row = not run.opts.fresh and mem:best_archived(run.dtype)
  if row then
    local r = sub.evaluate(row.source)
    if attempt.verified(r) then
      code, result, out.reused = row.source, r, "archive #" .. tostring(row.id)
      log.info("%s: reusing the archived kernel #%s", u.dir, tostring(row.id))
    end
  end
  if not code then
    local g, gerr = generate.run(sub, run.opts.gen_workers)
    if not g then
      out.outcome, out.error = "failed", gerr
    else
      code, result, out.worker, out.attempts = g.code, g.result, g.worker, g.attempts
    end
  end
  if code then
    out.outcome, out.time_ms = "verified", result.time_ms.median
    run.rd:write(dir .. "/best_kernel.py", code)
    run.rd:write(dir .. "/verify.json", result)
    local k = attempt.kernel({ id = u.dir, code = code, path = run.rd:path(dir .. "/best_kernel.py"), result = result })
    k.attempt_id = mem:add_attempt({ round = 0, role = "generate", strategy = "fuse", source_path = k.path,
      source_hash = fingerprint.of(code), fingerprint = k.fingerprint, stage = "done", correct = true,
      time_ms = result.time_ms.median, metrics = k.profile })
    if not out.reused then mem:archive(k, run.dtype) end
    u.kernel_code, u.result = code, result
  end
  local use = sub.usage()
  out.wall_s, out.tokens, out.llm_calls, out.cost_usd = ktime.now() - t0, use.tokens, use.calls, use.cost_usd
  run.rd:write(dir .. "/summary.json", out)
  mem:finish(code and "done" or "failed", out)
  return out
end

local function generate_all(run, st, unique)
  local progress = subrun.progress(run.progress, #unique, "generate")
  local fns = {}
  for i, u in ipairs(unique) do fns[i] = function() return session(run, u, progress(u.dir)) end end
  local outs, failed = {}, {}
  for i, res in ipairs(task.all(fns)) do
    local o = res.ok and res[1] or { dir = unique[i].dir, outcome = "error", error = tostring(res[1]) }
    outs[i] = o
    if o.outcome ~= "verified" then failed[#failed + 1] = string.format("%s: %s", o.dir, tostring(o.error):sub(1, 300)) end
  end
  st.sessions = outs
  if #failed > 0 then return nil, "no verified kernel for " .. table.concat(failed, "; ") end
  return outs
end

-- The paths -------------------------------------------------------------------------------------------

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
  local ok, gerr = stage(run, st, "generate", function() return generate_all(run, st, unique) end)
  if not ok then return nil, gerr end
  local c
  local composed, cerr = stage(run, st, "compose", function()
    c = composer.compose(strict(run), st.analysis, dec, unique)
    st.compose = c
    if not c.ok then return nil, c.error end
    return true
  end)
  if not composed then return nil, cerr end
  return { code = c.code, result = c.result, source = "compose/composed_kernel.py", proof = c.proof }
end

local function direct_path(run, st)
  return stage(run, st, "direct", function()
    local view = strict(run)
    local g, gerr = generate.run(view, run.opts.gen_workers)
    if not g then return nil, gerr end
    local r = view.pool:evaluate(view.job(g.code, { bench = { baselines = confirm.BASELINES } }))
    if not attempt.verified(r) then
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
  if not best then s.status, s.error = "failed", table.concat(failures, "; ") end
  s.route = { path = r.path, decided_by = r.decided_by, reason = r.reason or json.null, cached_from = r.cached_from or json.null,
    static = r.static, vote = r.vote or json.null, fallback = r.fallback or json.null, final = r.final or json.null }
  s.stages = st.stages
  s.verified = best ~= nil
  s.refused_decompositions = #(st.refusals or {})
  if st.dec then
    s.subgraphs = { count = #st.dec.subgraphs, distinct = #st.unique,
      kernels = st.sessions and #st.sessions > 0 and st.sessions or json.empty_array }
  end
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
    s.baselines = { eager_ms = res.eager_ms or json.null, compile_ms = res.compile_ms or json.null }
    s.speedup_vs_eager = res.eager_ms and res.eager_ms / t or json.null
    s.speedup_vs_compile = res.compile_ms and res.compile_ms / t or json.null
    s.sol_pct = res.roofline and res.roofline.sol_pct or json.null
    s.next = string.format("kagent-rt agents/beam.lua --problem %s --kernel %s --dtype %s", run.problem_path,
      run.rd:path("best_kernel.py"), run.dtype)
    local k = attempt.kernel({ id = "fused", code = best.code, path = run.rd:path("best_kernel.py"), result = res })
    k.attempt_id = run.mem:add_attempt({ round = 0, role = r.final == "decompose" and "compose" or "generate", strategy = "fuse",
      source_path = k.path, source_hash = fingerprint.of(best.code), fingerprint = k.fingerprint, stage = "done",
      correct = true, time_ms = t, speedup_vs_eager = res.speedup_vs_eager, speedup_vs_compile = res.speedup_vs_compile,
      metrics = k.profile })
    -- archived once timed next to both baselines: beam.lua --problem P then starts from it
    if res.eager_ms then run.mem:archive(k, run.dtype) end
  end
  s.wall_s = ktime.now() - run.t0
  run.rd:write("summary.json", s)
  run.mem:finish(best and "done" or "failed", s)
  return s
end

-- run(run) -> exit code: 0 with a verified program, 1 when neither path gave one, 3 when the LLM
-- stopped answering (then the other path is not tried: it needs the LLM too)
function M.run(run)
  local st = { stages = {} }
  run.rd:write("problem.py", run.problem_code)
  local guard = run.llm_guard
  local r = stage(run, st, "route", function() return route(run, st) end)
  local paths = { r.path, r.path == "direct" and "decompose" or "direct" }
  local best, failures = nil, {}
  for i, path in ipairs(paths) do
    if path == "decompose" and not st.analysis.decomposable then
      failures[#failures + 1] = "decompose: not possible (" .. tostring(r.static.reasons[1] or "the graph cannot be split") .. ")"
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
  if not best then
    run.progress:finish(string.format("run %s: no verified program.\n  %s\n  %s", run.rd.id,
      table.concat(failures, "\n  "), run.rd.dir))
    if guard.down then
      io.stderr:write(run.prog .. ": the LLM stopped answering (" .. guard.down .. "); try again later.\n")
      return 3
    end
    return 1
  end
  local b = s.baselines
  run.progress:finish(string.format("run %s: a verified program on the %s path%s: %.4f ms%s%s\n  %s\n  next: %s",
    run.rd.id, r.final, r.fallback and " (fallback)" or "", s.best_ms,
    b.eager_ms ~= json.null and string.format(", %.2fx eager", b.eager_ms / s.best_ms) or "",
    b.compile_ms ~= json.null and string.format(", %.2fx torch.compile", b.compile_ms / s.best_ms) or "",
    run.rd:path("best_kernel.py"), s.next))
  return 0
end

return M
