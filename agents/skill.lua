-- agents/skill.lua: KernelSkill's loop — skills retrieved by profile rules and ranked by their
-- learned record, one planned skill per worker with metric evidence, hard de-duplication of plans
-- by memory, repair rounds (agents/policies/skill.lua) on the search driver.
--   kagent-rt agents/skill.lua --problem P [--kernel K] [--rounds 8] [--directions 2] ...
return require("agents.lib.search").main("agents/skill.lua", kagent.args, "skill")
