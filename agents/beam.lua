-- agents/beam.lua: faster kernels by hardware-guided beam search with an LLM (KernelAgent's loop).
-- The policy is agents/policies/beam.lua, on the search driver (agents/search/driver.lua).
--   kagent-rt agents/beam.lua --problem P [--kernel K] [--rounds 8] [--beam 2] [--directions 2] ...
-- Without an LLM configured it falls back to the tuner. --policy picks another policy.
return require("agents.search.main").main("agents/beam.lua", kagent.args, "beam", {
  about = "Hardware-guided beam search: each round the N best kernels are profiled and diagnosed (M ranked "
    .. "bottlenecks in one LLM call), M workers rewrite each along one bottleneck, verify and repair it, and "
    .. "the N best distinct kernels are kept. Without an LLM configured the LLM-free tuner runs instead.",
  epilog = "docs/agents.md describes the run and its folder.",
})
