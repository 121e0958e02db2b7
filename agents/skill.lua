-- agents/skill.lua: faster kernels by KernelSkill's loop: planned skills ranked by their record.
-- Skills retrieved by profile rules and ranked by their learned record, one planned skill per
-- worker with metric evidence, hard de-duplication of plans by memory, repair rounds
-- (agents/policies/skill.lua) on the search driver.
--   kagent-rt agents/skill.lua --problem P [--kernel K] [--rounds 8] [--directions 2] ...
return require("agents.search.main").main("agents/skill.lua", kagent.args, "skill", {
  about = "KernelSkill's loop: the best kernel's profile selects the allowed skills, ranked by their learned "
    .. "record; the planner gives each of --directions workers one skill with metric evidence; plans memory has "
    .. "seen on this kernel are refused; failing kernels are audited and patched.",
  epilog = "docs/agents.md and docs/policies.md describe it.",
})
