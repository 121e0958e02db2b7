-- agents/beam.lua: hardware-guided beam search (the KernelAgent loop, agents/policies/beam.lua)
-- on the search driver (agents/lib/search.lua).
--   kagent-rt agents/beam.lua --problem P [--kernel K] [--rounds 8] [--beam 2] [--directions 2] ...
-- Without an LLM configured it falls back to the tuner. --policy picks another policy.
return require("agents.lib.search").main("agents/beam.lua", kagent.args, "beam")
