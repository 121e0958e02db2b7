-- The options of agents/fuse.lua: its own (route, decomposition, first kernels) and the shared
-- ones of agents/run/options.lua it takes. One table, read by fuse.lua and by a sweep that checks
-- its runs' options before starting them (agents/tools/sweep/plan.lua).
local options = require("agents.run.options")

local FUSE = "Route and decomposition"
local SPEC = {
  route = { type = "string", choices = { "auto", "direct", "decompose" }, default = "auto", group = FUSE,
    help = "auto: the router decides (rules, an LLM vote, memory); direct or decompose forces the path" },
  ["no-vote"] = { type = "boolean", default = false, group = FUSE, llm = true,
    help = "decide by the router's rules alone: no LLM vote" },
  fresh = { type = "boolean", default = false, group = FUSE,
    help = "ignore what memory holds for this problem (the route that worked, kernels of identical subgraphs)" },
  ["decompose-tries"] = { type = "integer", min = 1, default = 3, group = FUSE,
    help = "decompositions asked for before the decompose path gives up" },
  ["gen-workers"] = { type = "integer", min = 1, max = 64, default = 2, group = FUSE, llm = true,
    help = "parallel generation workers per subgraph (and for the direct path)" },
  decomposer = { type = "string", choices = { "auto", "rules", "llm" }, default = "auto", group = FUSE,
    help = "auto: the FX splitter's decomposition, the LLM's when it is refused; rules: the splitter's only; llm: the LLM's only" },
  first = { type = "string", choices = { "auto", "inductor", "reference", "none" }, default = "auto", group = FUSE,
    help = "each subgraph's first kernel, with no LLM: auto (TorchInductor's Triton on a GPU, the reference ops in CPU mode), "
      .. "inductor, reference (the subgraph's own PyTorch ops: what composing costs), none (LLM kernels only)" },
  ["first-library"] = { type = "string", choices = { "allow", "deny" }, default = "allow", group = FUSE,
    help = "may a first kernel call cuBLAS/cuDNN (reported as library time)? deny: GEMMs as Inductor's Triton templates" },
  floor = { type = "string", default = "split,whole,max-autotune", group = FUSE,
    help = "the first-program candidates, the fastest verified kept: split (the subgraphs' first kernels; always), "
      .. "whole (the whole problem as one Inductor program), max-autotune (the same with max-autotune, ATen or Triton GEMMs) "
      .. "(agents/flows/floor.lua)" },
  ["no-llm"] = { type = "boolean", default = false, group = FUSE,
    help = "the LLM-free path alone: the splitter's decomposition and the first program (no LLM needed)" },
  ["max-autotune"] = { type = "boolean", default = false, group = FUSE,
    help = "time torch.compile(mode=\"max-autotune\") beside eager and torch.compile (slow: it autotunes)" },
  ["own-share"] = { type = "number", above = 0, max = 1, default = 1, group = FUSE,
    help = "share of GPU time the program's own kernels must carry (the kernel audit; 1: no library kernel on the hot path)" },
}
for _, name in ipairs({ "problem", "shrink", "language", "library", "refine", "model", "prices", "dtype", "out", "db", "devices", "workers-per-gpu", "job-timeout", "max-spread", "metrics",
    "max-tokens", "max-reply-bytes", "max-code-bytes", "temperature", "budget-usd", "budget-tokens", "llm-timeout", "stream",
    "llm-failures", "llm-backoff" }) do
  SPEC[name] = options[name]
end
-- fuse.lua has no --resume: a stopped run is started again
local failures = {}
for k, v in pairs(options["llm-failures"]) do failures[k] = v end
failures.help = "LLM calls failing in a row that stop the run (exit 3)"
SPEC["llm-failures"] = failures
local groups = {}
for i, g in ipairs(getmetatable(options).groups) do
  groups[#groups + 1] = g
  if i == 1 then groups[#groups + 1] = FUSE end  -- after "Problem and start"
end
setmetatable(SPEC, { groups = groups })

return SPEC
