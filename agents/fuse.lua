-- agents/fuse.lua: a verified program for a fused operator or a whole model, from its reference.
-- (KernelBench Levels 2 and 3: the PyTorch reference is the problem file.)
--   kagent-rt agents/fuse.lua --problem P [--route auto|direct|decompose] [--gen-workers 2]
-- The router picks the direct path (one program generated for the whole forward) or the
-- decompose path (the model split into subgraphs that are checked against its traced graph,
-- a kernel generated and verified for each distinct subgraph, all in parallel, then one program
-- calling only those kernels, verified against the model); when the chosen path fails, the
-- other one runs. The result is best_kernel.py in a run directory and the archived kernel of the
-- problem, so `agents/beam.lua --problem P` (or `--kernel <run>/best_kernel.py`) optimizes it.
-- Stages and the run directory: agents/flows/fuse.lua and docs/agents.md.
local run_lib = require("agents.run")
local startup = require("agents.search.startup")
local fuse = require("agents.flows.fuse")

local PROG = "agents/fuse.lua"
local SPEC = require("agents.flows.fuse_options")

local HOW = {
  usage = "kagent-rt agents/fuse.lua --problem P [options]",
  about = "A verified program for a fused operator or a whole model: routed between one program generated for the "
    .. "whole forward and a decomposition into subgraphs checked against the traced model, a kernel generated and "
    .. "verified for each distinct subgraph in parallel, and one program calling only those kernels, verified "
    .. "against the model; the other path when the chosen one fails.",
  epilog = "Exit status: 0 a verified program, 1 neither path gave one, 2 bad input (a problem file that fails on its own "
    .. "included), no LLM configured (and no --no-llm) "
    .. "or the provider refused the key, 3 the LLM stopped answering, 4 a strict replay met calls it had no answer for. "
    .. "Continue with: kagent-rt agents/beam.lua --problem P --kernel <run>/best_kernel.py",
}

local function main(argv)
  local run, code = startup.open(PROG, argv, { spec = SPEC, how = HOW, plan = function(opts)
    local llm
    local _, floor_why = require("agents.flows.floor").parse(opts.floor)
    if floor_why then
      io.stderr:write(PROG .. ": " .. floor_why .. "\n")
      return nil, 2
    end
    if opts.no_llm then
      -- the LLM-free path is the splitter's decomposition: a route or decomposer that needs the
      -- LLM contradicts it, and is refused rather than quietly replaced
      for _, c in ipairs({ { "route", "direct" }, { "decomposer", "llm" } }) do
        if opts._given[c[1]] and opts[c[1]] == c[2] then
          io.stderr:write(string.format("%s: --no-llm takes the decompose path with the splitter's decomposition; "
            .. "--%s %s needs an LLM\n", PROG, c[1], c[2]))
          return nil, 2
        end
      end
      opts.route, opts.no_vote, opts.decomposer = "decompose", true, "rules"
      if opts.first == "none" then
        io.stderr:write(PROG .. ": --no-llm needs first kernels (--first none leaves no kernel source)\n")
        return nil, 2
      end
    else
      local lcode
      llm, lcode = run_lib.require_llm(PROG, opts, "writing kernels for a model",
        "Without one, --no-llm runs the LLM-free path alone (the splitter's decomposition and a first program).")
      if not llm then return nil, lcode end
    end
    opts.policy = "fuse"
    return { mode = "fuse", llm = llm }
  end })
  if not run then return code end
  return fuse.run(run)
end

return main(kagent.args)
