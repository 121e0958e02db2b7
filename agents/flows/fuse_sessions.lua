-- The generate stage of agents/fuse.lua (agents/flows/fuse.lua): one session per distinct
-- subgraph, all in parallel. A session tries the subgraph's first kernel without an LLM, then
-- generates one (agents/search/generate.lua) in a sub-run with its own memory row and folder
-- fuse/sg_<k>/, keeps the faster verified kernel and stores it.
local json = require("kagent.json")
local log = require("kagent.log")
local task = require("kagent.task")
local ktime = require("kagent.time")
local attempt = require("agents.search.attempt")
local fingerprint = require("agents.lib.fingerprint")
local verdict = require("agents.lib.verdict")
local first_kernel = require("agents.flows.first_kernel")
local generate = require("agents.search.generate")
local subrun = require("agents.flows.subrun")
local memory = require("agents.run.memory")

local M = {}

-- audited(share) -> what every evaluator job of a fuse run gets: the kernel audit's threshold
function M.audited(share)
  return function(j) j.fallback_threshold = share; return j end
end

-- first_share(run, source) -> the audit threshold of a first kernel and first program: library
-- kernels are let through (threshold 0, their share reported) for the reference ops and where
-- --first-library allow says so
function M.first_share(run, source)
  if source == "reference" or run.opts.first_library == "allow" then return 0 end
  return run.opts.own_share
end

-- timed_first(run, source) -> whether a first kernel is timed: where an LLM's kernel is compared
-- with it by time, or where its own audit must hold (--first-library deny). Otherwise only its
-- values matter (the source order does not depend on time) and only the composed program is timed:
-- the kernel is verified (pool:verify), with no timed loop, no exclusive lease, no re-measure.
local function timed_first(run, source)
  return run.llm ~= nil or M.first_share(run, source) > 0
end

-- first(run, u, path, out, order): the subgraph's first kernel without an LLM
-- (agents/flows/first_kernel.lua), the sources of `order` (default first_kernel.order(run)) tried
-- in order until one verifies against the subgraph; u.first = {source, code, result, untimed};
-- out.first says what happened (the row of docs/sweeps.md), passed_over why the sources before the
-- one kept did not verify. agents/flows/floor.lua calls it for the whole problem's subgraph.
function M.first(run, u, path, out, order)
  local tried, results, codes = {}, {}, {}
  order = order or first_kernel.order(run)
  for _, src in ipairs(order) do
    local code, why
    local worth, why_not = first_kernel.worth(src, u, results, order)
    if not worth then
      if why_not then tried[#tried + 1] = src .. ": " .. why_not end
      goto next_source
    end
    if src == "reference" then code = first_kernel.reference(u)
    else
      code, why = first_kernel.inductor(run, u, path, run.opts.first_library,
        src == "inductor_eager_layout" and "eager" or "inductor", src == "inductor_max_autotune")
    end
    if code then
      local dir = "fuse/" .. u.dir .. "/first_" .. src
      run.rd:write(dir .. ".py", code)
      local view = subrun.derive(run, { problem_path = path, problem_code = u.code, dir = dir,
        job = M.audited(M.first_share(run, src)) })
      local timed = timed_first(run, src)
      local r = timed and view.evaluate(code) or view.pool:verify(view.job(code))
      results[src], codes[src] = r, code
      run.rd:write(dir .. "/verify.json", r)
      if verdict.verified(r) or (not timed and type(r) == "table" and r.ok == true) then
        u.first = { source = src, code = code, result = r }
        local audit = type(r.audit) == "table" and r.audit or {}
        out.first = { source = src, label = first_kernel.label(src, run.devices[1].mode == "cpu"), verified = true,
          time_ms = timed and r.time_ms.median or json.null,
          own_time_frac = audit.applicable and audit.own_time_frac or json.null,
          passed_over = #tried > 0 and table.concat(tried, "; ") or nil }
        return
      end
      why = string.format("%s: %s", tostring(r.stage), tostring(r.error or "verified but not timed"))
    end
    tried[#tried + 1] = src .. ": " .. tostring(why)
    ::next_source::
  end
  local src, refusal = first_kernel.untimed(order, results)
  if src then
    -- right on every trial, its timing untrusted: composed, and the program's own verdict decides
    local r = results[src]
    u.first = { source = src, code = codes[src], result = r, untimed = refusal }
    out.first = { source = src, label = first_kernel.label(src, run.devices[1].mode == "cpu"), verified = true,
      untimed = refusal, passed_over = table.concat(tried, "; ") }
    log.warn("%s: no first kernel was timed with trust; composing the %s kernel, right on every trial (%s)",
      u.dir, src, refusal)
    return
  end
  out.first = { verified = false, error = table.concat(tried, "; ") }
end

local function session(run, u, progress)
  local t0 = ktime.now()
  local dir = "fuse/" .. u.dir
  local path = run.rd:path(dir .. "/problem.py")
  run.rd:write(path, u.code)
  memory.adopt_legacy_hashes(run.db, u.code)
  local mem = memory.open(run.db, { problem = path, problem_hash = fingerprint.hash(u.code), gpu = run.mem.info.gpu,
    policy = "fuse-subgraph", config = { fuse_run = run.mem.run_id, subgraph = u.dir, dtype = run.dtype } }, run.rd.writes)
  local sub = subrun.derive(run, { problem_path = path, problem_code = u.code, dir = dir, mem = mem, progress = progress,
    job = M.audited(run.opts.own_share) })
  memory.rekey_op_class(run.db, fingerprint.hash(u.code), sub.op_class)  -- as agents/run/init.lua does for a run
  local out = { dir = u.dir, occurrences = u.occurrences, signature = u.signature }
  local code, result
  if run.opts.first ~= "none" then M.first(run, u, path, out) end
  if run.llm then
    -- a kernel verified on this very subgraph in an earlier run is checked again and reused
    local row = not run.opts.fresh and mem:best_archived(run.dtype)
    if row then
      local r = sub.evaluate(row.source)
      if verdict.verified(r) then
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
  end
  -- the LLM's kernel only where it verified and is faster than the first kernel (or the first
  -- kernel has no trusted time)
  local f = u.first
  if f and (not code or (not f.untimed and f.result.time_ms.median <= result.time_ms.median)) then
    if code then log.info("%s: the first kernel (%s) is faster than the LLM's: kept", u.dir, f.source) end
    code, result, out.kept = f.code, f.result, "first (" .. f.source .. ")"
  elseif code then
    out.kept = out.reused and "archive" or "llm"
  end
  if not code and not out.error then out.error = out.first and out.first.error or "no kernel source" end
  if code then
    out.outcome = "verified"
    run.rd:write(dir .. "/best_kernel.py", code)
    run.rd:write(dir .. "/verify.json", result)
    if verdict.verified(result) then
      out.time_ms = result.time_ms.median
      local k = attempt.kernel({ id = u.dir, code = code, path = run.rd:path(dir .. "/best_kernel.py"), result = result })
      k.attempt_id = attempt.store_kernel(mem, k, "generate", "fuse")
      if out.kept == "llm" then mem:archive(k, run.dtype) end
    else  -- a first kernel verified untimed, or whose timing was not trusted: no figure to store
      out.untimed = f.untimed
    end
    u.kernel_code, u.result = code, result
  else
    out.outcome = "failed"
  end
  local use = sub.usage()
  out.wall_s, out.tokens, out.llm_calls, out.cost_usd = ktime.now() - t0, use.tokens, use.calls, use.cost_usd
  run.rd:write(dir .. "/summary.json", out)
  mem:finish(code and "done" or "failed", out)
  return out
end

function M.generate_all(run, st, unique)
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

return M
