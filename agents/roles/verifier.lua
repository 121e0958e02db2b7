-- Verifier role: evaluate a candidate (verify -> audit -> benchmark -> profile, one job); when it
-- fails, have it repaired and evaluate again, up to --refine times. The repair is a function of
-- the failure and the repair chain so far: by default one LLM call (prompts/refine.md) that sees
-- every earlier try's stage and error, not only the last; the skill policy passes its auditor.
local json = require("kagent.json")
local log = require("kagent.log")
local verdict = require("agents.lib.verdict")

local M = {}

-- A try the evaluator could not measure (ENOISY: the machine was too noisy; it already waited and
-- measured again) is not the kernel's failure: the same code is evaluated again, up to this many
-- more times, and never sent for repair.
M.NOT_MEASURED_TRIES = 2

-- failure_details(result) -> text with the evidence a fix needs (mismatch, failed checks, audit)
function M.failure_details(r)
  local out = {}
  if type(r.mismatch) == "table" then
    out[#out + 1] = "Mismatch: " .. json.encode(r.mismatch)
  end
  if r.max_abs_err then out[#out + 1] = string.format("max_abs_err=%g max_rel_err=%s", r.max_abs_err, tostring(r.max_rel_err)) end
  if type(r.checks) == "table" then
    local bad = {}
    for k, v in pairs(r.checks) do if v == false then bad[#bad + 1] = k end end
    table.sort(bad)
    if #bad > 0 then out[#out + 1] = "Failed checks: " .. table.concat(bad, ", ") end
  end
  if type(r.audit) == "table" and r.audit.fallback then
    out[#out + 1] = "Audit: the GPU time is spent in library kernels (fallback), not in your own kernels."
  end
  if type(r.audit) == "table" and type(r.audit.static_findings) == "table" then
    for _, f in ipairs(r.audit.static_findings) do
      out[#out + 1] = string.format("Static check %s at line %s: %s", tostring(f.rule), tostring(f.line), tostring(f.text))
    end
  end
  return #out > 0 and table.concat(out, "\n") or ""
end

-- chain_text(chain) -> the repairs so far, one line each, for prompts
function M.chain_text(chain)
  if not chain or #chain == 0 then return "(this is the first failure)" end
  local out = {}
  for _, c in ipairs(chain) do
    out[#out + 1] = string.format("- try %d failed at %s: %s%s", c.try, tostring(c.stage),
      tostring(c.error):sub(1, 300), c.diagnosis and ("\n  diagnosis then: " .. tostring(c.diagnosis):sub(1, 300)) or "")
  end
  return table.concat(out, "\n")
end

-- refine(run, f) -> {code, prompt_path, reply_path, error, llm_code}: the default repair, one LLM
-- call (error and llm_code: it failed).
-- f: {code, result, try, max, chain, target, keep, shared, dir}
function M.refine(run, f)
  local r = f.result
  local a = run.ask_code({ tag = "refine", template = "refine", shared = f.shared or run.problem_block(), base = f.code,
    vars = {
      attempt = f.try, max_attempts = f.max, target = f.target or "a first implementation of the problem",
      keep = f.keep or "the kernel's approach", stage = r.stage or "?", error = r.error or "unknown error",
      details = M.failure_details(r), history = M.chain_text(f.chain), dtype = run.dtype,
      kernel_code = f.code or "(no code)", entry_point = run.entry_point(f.code or ""),
    } })
  local pp, rp = f.dir .. "/refine_" .. f.try .. "_prompt.txt", f.dir .. "/refine_" .. f.try .. "_reply.txt"
  run.rd:write(pp, a.prompt)
  run.rd:write(rp, a.reply)
  return { code = a.code, error = a.error, llm_code = a.llm_code, prompt_path = pp, reply_path = rp }
end

-- run(run, code, w, opts) -> {ok, result, code, tries, chain, cached, stopped, llm_code, llm_error}
-- (llm_code, llm_error: a repair's LLM call failed, which ended the loop)
-- w: {dir}; writes kernel_attempt_<i>.py and verify_<i>.json there. opts: max_refine (default
-- --refine), target/keep (prompt words), shared (prompt block sent first), repair (function as
-- refine above), stop() -> true ends the loop before its next step (another worker already
-- won), phase(name) is told "eval" or "llm" as each step starts.
function M.run(run, code, w, opts)
  opts = opts or {}
  local max_refine = opts.max_refine or run.opts.refine
  local repair = opts.repair or M.refine
  local phase = opts.phase or function() end
  local tries, chain, cached = {}, {}, nil
  local function stopped(r)
    return { ok = false, stopped = true, result = r, code = code, tries = #tries, chain = chain }
  end
  for i = 0, max_refine do
    if opts.stop and opts.stop() then return stopped(tries[#tries] and tries[#tries].result) end
    local r
    if not code or code == "" then
      r = { ok = false, stage = "reply", error = "ENOCODE: the reply contained no Python code block" }
    else
      run.rd:write(w.dir .. "/kernel_attempt_" .. i .. ".py", code)
      phase("eval")
      r, cached = run.evaluate(code)
      for again = 1, M.NOT_MEASURED_TRIES do
        if not verdict.not_measured(r) then break end
        log.info("%s: not measured (%s); measuring it again (%d of %d)", w.dir, tostring(r.error):sub(1, 120),
          again, M.NOT_MEASURED_TRIES)
        r, cached = run.evaluate(code)
      end
    end
    run.rd:write(w.dir .. "/verify_" .. i .. ".json", r)
    tries[#tries + 1] = { code = code, result = r }
    if r.ok then return { ok = true, result = r, code = code, tries = #tries, chain = chain, cached = cached } end
    -- still not measured: nothing to repair, and the machine is no reason to change the code
    if verdict.not_measured(r) then break end
    if opts.stop and opts.stop() and i < max_refine then return stopped(r) end
    if i == max_refine or not run.llm then break end
    phase("llm")
    local fix = repair(run, { code = code, result = r, try = i + 1, max = max_refine, chain = chain,
      target = opts.target, keep = opts.keep, shared = opts.shared, dir = w.dir })
    chain[#chain + 1] = { try = i + 1, stage = r.stage, error = r.error, diagnosis = fix.diagnosis,
      prompt_path = fix.prompt_path, reply_path = fix.reply_path,
      source_path = code and code ~= "" and (w.dir .. "/kernel_attempt_" .. i .. ".py") or nil }
    if fix.error then
      local last = tries[#tries]
      return { ok = false, result = last.result, code = last.code, tries = #tries, chain = chain,
        llm_code = fix.llm_code or "ELLM", llm_error = tostring(fix.error) }
    end
    code = fix.code
  end
  local last = tries[#tries]
  return { ok = false, result = last.result, code = last.code, tries = #tries, chain = chain }
end

return M
