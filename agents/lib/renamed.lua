-- Old module names kept for a while (docs/policies.md, "Old module names"): the module that lived
-- at an old name is now `new`; a forwarding module at the old path is the one line
--   return require("agents.lib.renamed")("agents.lib.promotion", "agents.search.promotion")
-- so a user's policy that requires the old name still runs, and the log says once per name what
-- to require instead.
local log = require("kagent.log")

local told = {}

return function(old, new)
  if not told[old] then
    told[old] = true
    log.warn("require(\"%s\") is deprecated: the module is now \"%s\" (docs/policies.md, \"Old module names\")", old, new)
  end
  return require(new)
end
