-- agents/fuse.lua: a verified program for a fused operator or a whole model (KernelBench Levels
-- 2 and 3), from its PyTorch reference.
--   kagent-rt agents/fuse.lua --problem P [--route auto|direct|decompose] [--gen-workers 2]
-- The router picks the direct path (one program generated for the whole forward) or the
-- decompose path (the model split into subgraphs that are checked against its traced graph,
-- a kernel generated and verified for each distinct subgraph, all in parallel, then one program
-- calling only those kernels, verified against the model); when the chosen path fails, the
-- other one runs. The result is best_kernel.py in a run directory and the archived kernel of the
-- problem, so `agents/beam.lua --problem P` (or `--kernel <run>/best_kernel.py`) optimizes it.
-- Stages and the run directory: agents/lib/fuse.lua and docs/agents.md.
local llm = require("kagent.llm")
local options = require("agents.lib.options")
local run_lib = require("agents.lib.run")
local fuse = require("agents.lib.fuse")

local PROG = "agents/fuse.lua"
local SPEC = {
  route = { type = "string", default = "auto", help = "auto (the router decides) | direct | decompose" },
  ["route-vote"] = { type = "boolean", default = true, help = "ask the LLM for a vote when the router's rules leave room" },
  ["route-cache"] = { type = "boolean", default = true, help = "reuse the route that gave a verified program in an earlier run on this problem" },
  ["decompose-tries"] = { type = "number", default = 3, help = "decompositions asked for before the decompose path gives up" },
  ["gen-workers"] = { type = "number", default = 2, help = "parallel generation workers per subgraph (and for the direct path)" },
  ["own-share"] = { type = "number", default = 1, help = "share of GPU time the program's own kernels must carry (kernel audit; 1 = no library kernel on the hot path)" },
  ["reuse-kernels"] = { type = "boolean", default = true, help = "reuse a kernel archived for an identical subgraph (verified again first)" },
}
for _, name in ipairs({ "problem", "refine", "model", "dtype", "out", "db", "devices", "job-timeout", "metrics",
    "max-tokens", "temperature", "budget-usd", "budget-tokens" }) do
  SPEC[name] = options[name]
end

local function main(argv)
  local opts, _, code = run_lib.parse(PROG, argv, SPEC)
  if not opts then return code end
  if opts.route ~= "auto" and opts.route ~= "direct" and opts.route ~= "decompose" then
    io.stderr:write(PROG .. ": --route must be auto, direct or decompose, not " .. tostring(opts.route) .. "\n")
    return 2
  end
  if opts.own_share <= 0 or opts.own_share > 1 then
    io.stderr:write(PROG .. ": --own-share must be in (0, 1]\n")
    return 2
  end
  if opts.model then llm.configure({ model = opts.model }) end
  local configured, which = llm.configured()
  if not configured then
    io.stderr:write(PROG .. ": no LLM is configured, and writing kernels for a model needs one: " .. tostring(which) .. "\n")
    return 2
  end
  opts.policy = "fuse"
  local run, _, ecode = run_lib.setup(PROG, opts, { mode = "fuse", llm = llm, spec = SPEC })
  if not run then return ecode end
  return fuse.run(run)
end

return main(kagent.args)
