-- Auditor role of the skill policy's repair rounds: a failing kernel is first diagnosed (one call,
-- prompts/audit.md, seeing the whole repair chain so far), then patched minimally to that
-- diagnosis (one call, prompts/repair.md). It is the `repair` step of agents/roles/verifier.lua;
-- the chain it builds is stored under the attempt in memory and shown in later plans.
local verifier = require("agents.roles.verifier")

local M = {}

-- repair(run, f) -> {code, diagnosis, prompt_path, reply_path, error, llm_code}; f as verifier.refine's
function M.repair(run, f)
  local r = f.result
  local shared = f.shared or run.problem_block()
  local common = { attempt = f.try, max_attempts = f.max, target = f.target or "this problem",
    stage = r.stage or "?", history = verifier.chain_text(f.chain), dtype = run.dtype, kernel_code = f.code or "(no code)" }
  local vars = { error = r.error or "unknown error", details = verifier.failure_details(r) }
  for k, v in pairs(common) do vars[k] = v end
  local audit = run.render("audit", vars)
  local base = string.format("%s/repair_%d", f.dir, f.try)
  run.rd:write(base .. "_audit_prompt.txt", run.full_prompt(audit, shared))
  local res, err, ecode = run.chat(audit, "audit", shared)
  run.rd:write(base .. "_audit_reply.txt", res and run.reply_trace(res.text) or ("LLM call failed: " .. tostring(err)))
  if not res then return { error = err, llm_code = ecode, prompt_path = base .. "_audit_prompt.txt" } end
  local d = run.extract_json(res.text)
  d = type(d) == "table" and d or { cause = res.text:sub(1, 400), evidence = "", fix = "" }
  local pvars = { cause = tostring(d.cause or "?"), evidence = tostring(d.evidence or ""), fix = tostring(d.fix or ""),
    keep = f.keep or "the kernel's approach", entry_point = run.entry_point(f.code or "") }
  for k, v in pairs(common) do pvars[k] = v end
  local patch = run.render("repair", pvars)
  run.rd:write(base .. "_prompt.txt", run.full_prompt(patch, shared))
  local res2, err2, ecode2 = run.chat(patch, "repair", shared)
  run.rd:write(base .. "_reply.txt", res2 and run.reply_trace(res2.text) or ("LLM call failed: " .. tostring(err2)))
  local code, cerr, ccode
  if res2 then code, cerr, ccode = run.code_from(res2.text) else cerr, ccode = err2, ecode2 end
  return { code = code, error = cerr, llm_code = ccode,
    diagnosis = pvars.cause .. " -> fix: " .. pvars.fix, prompt_path = base .. "_prompt.txt", reply_path = base .. "_reply.txt" }
end

return M
