-- Verifier role: evaluate a candidate (verify -> audit -> benchmark -> profile, in one job); on
-- failure ask the LLM to fix it with the exact error, up to `max_refine` times.
local json = require("kagent.json")

local M = {}

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

-- run(ctx, code, w) -> {ok, result, code, attempts = {{code, result, prompt, reply}}, stopped}
-- w: {dir, bottleneck, round, k, stop, phase}; writes kernel_attempt_<i>.py, verify_<i>.json,
-- refine_<i>_*.txt. Optional hooks: w.stop() -> true ends the loop before its next step (another
-- worker already won); w.phase(name) is told "eval" or "llm" as each step starts.
function M.run(ctx, code, w)
  local attempts = {}
  local max_refine = ctx.opts.refine or 3
  local phase = w.phase or function() end
  for i = 0, max_refine do
    if w.stop and w.stop() then
      return { ok = false, stopped = true, result = attempts[#attempts] and attempts[#attempts].result,
        code = code, attempts = attempts }
    end
    local r
    if not code or code == "" then
      r = { ok = false, stage = "load", error = "ELOAD: the reply contained no Python code block" }
    else
      ctx.rd:write(w.dir .. "/kernel_attempt_" .. i .. ".py", code)
      phase("eval")
      r = ctx.pool:evaluate(ctx.job(code))
    end
    ctx.rd:write(w.dir .. "/verify_" .. i .. ".json", r)
    local a = { code = code, result = r }
    attempts[#attempts + 1] = a
    if r.ok then return { ok = true, result = r, code = code, attempts = attempts } end
    if w.stop and w.stop() and i < max_refine then
      return { ok = false, stopped = true, result = r, code = code, attempts = attempts }
    end
    if i == max_refine or not ctx.llm_enabled then break end
    local prompt = ctx.render("refine", {
      attempt = i + 1, max_attempts = max_refine,
      target = w.bottleneck and string.format('the bottleneck "%s"', w.bottleneck.summary or "")
        or "a first implementation of the problem",
      keep = w.bottleneck and "the optimization" or "the kernel's approach",
      stage = r.stage or "?", error = r.error or "unknown error", details = M.failure_details(r),
      dtype = ctx.dtype, problem_code = ctx.problem_code, kernel_code = code or "(no code)",
      entry_point = ctx.entry_point(code or ""),
    })
    phase("llm")
    local res, err = ctx.chat(prompt, "refine")
    ctx.rd:write(w.dir .. "/refine_" .. (i + 1) .. "_prompt.txt", prompt)
    ctx.rd:write(w.dir .. "/refine_" .. (i + 1) .. "_reply.txt", res and res.text or ("LLM call failed: " .. tostring(err)))
    a.refine_prompt, a.refine_reply = prompt, res and res.text
    if not res then break end
    code = ctx.extract_code(res.text)
  end
  local last = attempts[#attempts]
  return { ok = false, result = last.result, code = last.code, attempts = attempts }
end

return M
