-- Divergent branches run both paths in a warp.
return {
  name = "warp_uniform",
  category = "divergence",
  intent = "Warp-uniform control flow: make branch conditions depend on program ids rather than "
    .. "lane data, replace data-dependent branches by selects (tl.where).",
  -- the same change in CUDA C++ (--language cuda, agents/lib/skills.lua)
  intents = { cuda = "Warp-uniform control flow: make branch conditions depend on block and warp indices "
    .. "rather than lane data, replace data-dependent branches by selects (ternaries the "
    .. "compiler predicates)." },
  applies = function(p, f)
    local u = p.branch_uniform_pct
    if u and u < 90 then return 0.8 - u / 200 end
    if (p.stall_branch or 0) > 10 then return 0.5 end
    return nil
  end,
  expected = { "smsp__sass_average_branch_targets_threads_uniform up", "branch stalls down" },
  avoid = { "tl.where on both expensive sides when one is rarely taken" },
}
