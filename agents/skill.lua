-- agents/skill.lua: KernelSkill's loop — skills retrieved by profile rules and ranked by their
-- learned record, one planned skill per worker with metric evidence, hard de-duplication of plans
-- by memory, repair rounds (agents/policies/skill.lua) on the search driver.
--   kagent-rt agents/skill.lua --problem P [--kernel K] [--rounds 8] [--directions 2] ...
local root = rawget(_G, "kagent") and kagent.root or "."
package.path = root .. "/?.lua;" .. package.path
return require("agents.lib.search").main("agents/skill.lua", kagent.args, "skill")
