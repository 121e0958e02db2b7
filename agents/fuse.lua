-- agents/fuse.lua: a verified program for a fused operator or a whole model (KernelBench Levels
-- 2 and 3), from its PyTorch reference.
--   kagent-rt agents/fuse.lua --problem P [--route auto|direct|decompose] [--gen-workers 2]
-- The router picks the direct path (one program generated for the whole forward) or the
-- decompose path (the model split into subgraphs that are checked against its traced graph,
-- a kernel generated and verified for each distinct subgraph, all in parallel, then one program
-- calling only those kernels, verified against the model); when the chosen path fails, the
-- other one runs. The result is best_kernel.py in a run directory and the archived kernel of the
-- problem, so `agents/beam.lua --problem P` (or `--kernel <run>/best_kernel.py`) optimizes it.
-- Stages and the run directory: agents/flows/fuse.lua and docs/agents.md.
local options = require("agents.run.options")
local run_lib = require("agents.run")
local startup = require("agents.search.startup")
local fuse = require("agents.flows.fuse")

local PROG = "agents/fuse.lua"
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
  ["no-llm"] = { type = "boolean", default = false, group = FUSE,
    help = "the LLM-free path alone: the splitter's decomposition and the first program (no LLM needed)" },
  ["max-autotune"] = { type = "boolean", default = false, group = FUSE,
    help = "time torch.compile(mode=\"max-autotune\") beside eager and torch.compile (slow: it autotunes)" },
  ["own-share"] = { type = "number", above = 0, max = 1, default = 1, group = FUSE,
    help = "share of GPU time the program's own kernels must carry (the kernel audit; 1: no library kernel on the hot path)" },
}
for _, name in ipairs({ "problem", "refine", "model", "prices", "dtype", "out", "db", "devices", "workers-per-gpu", "job-timeout", "metrics",
    "max-tokens", "temperature", "budget-usd", "budget-tokens", "llm-timeout", "stream", "llm-failures", "llm-backoff" }) do
  SPEC[name] = options[name]
end
local groups = {}
for i, g in ipairs(getmetatable(options).groups) do
  groups[#groups + 1] = g
  if i == 1 then groups[#groups + 1] = FUSE end  -- after "Problem and start"
end
setmetatable(SPEC, { groups = groups })

local HOW = {
  usage = "kagent-rt agents/fuse.lua --problem P [options]",
  about = "A verified program for a fused operator or a whole model: routed between one program generated for the "
    .. "whole forward and a decomposition into subgraphs checked against the traced model, a kernel generated and "
    .. "verified for each distinct subgraph in parallel, and one program calling only those kernels, verified "
    .. "against the model; the other path when the chosen one fails.",
  epilog = "Exit status: 0 a verified program, 1 neither path gave one, 2 bad input or no LLM configured (and no --no-llm), "
    .. "3 the LLM stopped answering. Continue with: kagent-rt agents/beam.lua --problem P --kernel <run>/best_kernel.py",
}

local function main(argv)
  local run, code = startup.open(PROG, argv, { spec = SPEC, how = HOW, plan = function(opts)
    local llm
    if opts.no_llm then
      opts.route, opts.no_vote, opts.decomposer = "decompose", true, "rules"
      if opts.first == "none" then
        io.stderr:write(PROG .. ": --no-llm needs first kernels (--first none leaves no kernel source)\n")
        return nil, 2
      end
    else
      local lcode
      llm, lcode = run_lib.require_llm(PROG, opts, "writing kernels for a model (or --no-llm)")
      if not llm then return nil, lcode end
    end
    opts.policy = "fuse"
    return { mode = "fuse", llm = llm }
  end })
  if not run then return code end
  return fuse.run(run)
end

return main(kagent.args)
