-- Auditor role of the skill policy's repair rounds: a failing kernel is first diagnosed (one call,
-- prompts/audit.md, seeing the whole repair chain so far), then patched minimally to that
-- diagnosis (one call, prompts/repair.md). It is the `repair` step of agents/roles/verifier.lua;
-- the chain it builds is stored under the attempt in memory and shown in later plans.
local verifier = require("agents.roles.verifier")

local M = {}

-- the shape prompts/audit.md asks for
M.AUDIT_SCHEMA = [[{"cause": "...", "evidence": "...", "fix": "..."}]]

-- repair(run, f) -> {code, diagnosis, prompt_path, reply_path, error, llm_code}; f as verifier.refine's
function M.repair(run, f)
  local r = f.result
  local shared = f.shared or run.problem_block()
  local common = { attempt = f.try, max_attempts = f.max, target = f.target or "this problem",
    stage = r.stage or "?", history = verifier.chain_text(f.chain), dtype = run.dtype, kernel_code = f.code or "(no code)" }
  local vars = { error = r.error or "unknown error", details = verifier.failure_details(r) }
  for k, v in pairs(common) do vars[k] = v end
  local base = string.format("%s/repair_%d", f.dir, f.try)
  local a = run.ask_json({ tag = "audit", template = "audit", vars = vars, shared = shared,
    want = { fields = { "cause", "fix" }, schema = M.AUDIT_SCHEMA } })
  run.rd:write(base .. "_audit_prompt.txt", a.prompt)
  run.rd:write(base .. "_audit_reply.txt", a.reply)
  if not a.res then return { error = a.error, llm_code = a.llm_code, prompt_path = base .. "_audit_prompt.txt" } end
  -- a diagnosis that could not be read still says something: its text is the cause
  local d = a.value or { cause = (a.res.text or ""):sub(1, 400), evidence = "", fix = "" }
  local pvars = { cause = tostring(d.cause or "?"), evidence = tostring(d.evidence or ""), fix = tostring(d.fix or ""),
    keep = f.keep or "the kernel's approach", entry_point = run.entry_point(f.code or "") }
  for k, v in pairs(common) do pvars[k] = v end
  local p = run.ask_code({ tag = "repair", template = "repair", vars = pvars, shared = shared, base = f.code })
  run.rd:write(base .. "_prompt.txt", p.prompt)
  run.rd:write(base .. "_reply.txt", p.reply)
  return { code = p.code, error = p.error, llm_code = p.llm_code,
    diagnosis = pvars.cause .. " -> fix: " .. pvars.fix, prompt_path = base .. "_prompt.txt", reply_path = base .. "_reply.txt" }
end

return M
