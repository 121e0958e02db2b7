-- What the agents write kernels in (--language) and which library calls a candidate may make
-- (--library), as prompts and evaluator jobs see them: the one place that maps the options and
-- the device mode to the prompt text (prompts/language_<id>.md, shadowed from KAGENT_HOME like
-- every prompt) and to each entry point's default policy (docs/agents.md, "Languages and library
-- calls").
local M = {}

-- id(language, cpu) -> the prompt file's id: a GPU run writes Triton or CUDA C++; a CPU-mode run
-- has no GPU to run either, so Triton becomes pure PyTorch and CUDA becomes C++ for the CPU
-- (load_inline with cpp_sources only)
function M.id(language, cpu)
  if language == "cuda" then return cpu and "cpp_cpu" or "cuda" end
  return cpu and "pytorch_cpu" or "triton"
end

-- how the system and generation prompts name the language ("You write {{language}} kernels")
M.NAMES = {
  triton = "Triton",
  pytorch_cpu = "PyTorch (CPU mode)",
  cuda = "CUDA C++ (torch.utils.cpp_extension.load_inline)",
  cpp_cpu = "C++ for the CPU (CPU mode: torch.utils.cpp_extension.load_inline with cpp_sources)",
}

-- The policies of --library, as the prompts state them; the evaluator judges them (job field
-- `library`, src/gpu/eval/README.md).
M.LIBRARY_RULES = {
  own = "The main computation runs in your own kernels: do not call PyTorch, cuBLAS or cuDNN for it; "
    .. "PyTorch may allocate outputs and reshape views.",
  some = "Vendor libraries (cuBLAS, cuBLASLt, cuDNN) and CUDA graphs may do part of the work, but at least one "
    .. "of your own kernels must run on every call.",
  any = "Library calls are allowed: only correctness and time are judged.",
}

-- Each entry point's --library when none is given: KernelSkill's loop allows libraries (its
-- cuBLASLt skill) as long as one own kernel runs; the others keep KernelAgent's rule.
M.LIBRARY_DEFAULTS = { ["agents/skill.lua"] = "some" }

-- library_default(prog) -> the --library of an entry point that was given none
function M.library_default(prog)
  return M.LIBRARY_DEFAULTS[prog] or "own"
end

-- settle(prog, opts): fills opts.library with the entry point's default where the command line
-- (or a resumed run's options) gave none, and opts.language with triton
function M.settle(prog, opts)
  opts.library = opts.library or M.library_default(prog)
  opts.language = opts.language or "triton"
end

-- add(r): r.language_id, r.language_name and r.language_rules() (the rendered
-- prompts/language_<id>.md) on a run; r.render must exist (agents/run/prompts.lua)
function M.add(r)
  local cpu = not r.can_profile
  r.language_id = M.id(r.opts.language, cpu)
  r.language_name = M.NAMES[r.language_id]
  local rules
  function r.language_rules()
    rules = rules or r.render("language_" .. r.language_id, {
      library_rule = M.LIBRARY_RULES[r.opts.library or "own"] or M.LIBRARY_RULES.own })
    return rules
  end
end

return M
