-- agents/tune.lua: improve a kernel with no LLM — the tuner policy (agents/policies/tune.lua).
--   kagent-rt agents/tune.lua --problem P [--kernel K] [--rounds 8] [--tune-candidates 8]
return require("agents.search.main").main("agents/tune.lua", kagent.args, "tune", {
  about = "The LLM-free tuner: a coordinate search over the kernel's integer knobs (block sizes, num_warps, "
    .. "num_stages, triton.Config entries), neighbours evaluated in parallel, a child kept only through the "
    .. "promotion gate. It stops when no neighbour is faster beyond noise.",
  epilog = "--kernel defaults to the problem's archived best kernel; the tuner writes none, so without one it asks "
    .. "for --kernel. --policy beam|greedy|skill calls the LLM: then also exit 2 for a refused API key, 3 the LLM "
    .. "stopped answering, 4 a strict replay met calls it had no answer for. docs/agents.md describes it.",
  llm_free = true,
})
