-- What an evaluator result says, read the same way by the search, the flows and the roles:
-- whether it may be ranked, and the short signature of an error that memory keeps.
local M = {}

-- verified(result) -> true for a result that may be ranked: ok and a median time. Anything else
-- (ok=false with any stage, including figures the evaluator could not trust) is a failure.
function M.verified(r)
  return type(r) == "table" and r.ok == true and type(r.time_ms) == "table" and type(r.time_ms.median) == "number"
end

-- not_measured(result) -> true for a result the evaluator could not measure because the machine
-- was too noisy (ENOISY: a control timed beside the kernel was as noisy as it; docs/lua-api.md).
-- Neither accepted nor a refusal of the kernel: the kernel is kept and measured again later.
function M.not_measured(r)
  return type(r) == "table" and r.ok == false and r.code == "ENOISY"
end

-- the refusals of a figure, not of a kernel's values: its timing could not be trusted (or, ENOISY,
-- not measured at all)
local UNTRUSTED_FIGURE = { EUNTRUSTED = true, ETAMPER = true, ECACHE = true, ENOISY = true }

-- correct_untimed(result) -> the error of a result refused only because its figure could not be
-- trusted (EUNTRUSTED, ETAMPER, ECACHE or ENOISY at stage "timing" or "benchmark") after every one of its
-- correctness checks passed; nil for anything else. Such a kernel has no time to rank it by.
function M.correct_untimed(r)
  if type(r) ~= "table" or r.ok ~= false or not UNTRUSTED_FIGURE[r.code] then return nil end
  if r.stage ~= "timing" and r.stage ~= "benchmark" then return nil end
  if type(r.checks) ~= "table" or r.checks.values ~= true then return nil end
  for _, passed in pairs(r.checks) do
    if passed ~= true then return nil end
  end
  return tostring(r.error)
end

-- error_signature(err) -> the error's code ("ECOMPILE" of "ECOMPILE: ...") or its first 40
-- characters; nil without an error
function M.error_signature(err)
  if not err then return nil end
  return tostring(err):match("^(%u+):") or tostring(err):sub(1, 40)
end

-- verdict_word(summary) -> "yes" (confirmed), "not confirmed" (no finalist passed the final
-- confirmation) or "no" (failed, or no summary): the one word tables and pages show
function M.verdict_word(s)
  if M.reportable(s) then return "yes" end
  return type(s) == "table" and s.status == "unconfirmed" and "not confirmed" or "no"
end

-- reportable(summary) -> whether a summary carries figures (a confirmed best kernel). Tables
-- and pages show a speedup only where this holds, and "not confirmed" otherwise.
function M.reportable(s)
  return type(s) == "table" and s.verified == true
end

return M
