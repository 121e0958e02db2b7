-- What an evaluator result says, read the same way by the search, the flows and the roles:
-- whether it may be ranked, and the short signature of an error that memory keeps.
local M = {}

-- verified(result) -> true for a result that may be ranked: ok and a median time. Anything else
-- (ok=false with any stage, including figures the evaluator could not trust) is a failure.
function M.verified(r)
  return type(r) == "table" and r.ok == true and type(r.time_ms) == "table" and type(r.time_ms.median) == "number"
end

-- error_signature(err) -> the error's code ("ECOMPILE" of "ECOMPILE: ...") or its first 40
-- characters; nil without an error
function M.error_signature(err)
  if not err then return nil end
  return tostring(err):match("^(%u+):") or tostring(err):sub(1, 40)
end

return M
