-- Block size, warps and stages are the cheapest knobs; the tuner (agents/tune.lua) searches them.
return {
  name = "launch_tuning",
  category = "launch",
  intent = "Launch tuning: choose block sizes, num_warps and num_stages for this shape (or add a "
    .. "small triton.autotune config list keyed on the shape).",
  -- the same change in CUDA C++ (--language cuda, agents/lib/skills.lua)
  intents = { cuda = "Launch tuning: choose threads per block, blocks per SM and the grid for this shape "
    .. "(`__launch_bounds__`, a small table of launch configurations keyed on the shape)." },
  applies = function(p, f)
    if f.tunables and f.tunables > 0 then
      if not p.has_metrics then return 0.4 end
      return 0.35
    end
    return nil
  end,
  expected = { "time down", "achieved occupancy closer to theoretical" },
  avoid = { "autotuning over dozens of configs (compile time)" },
  tunables = { BLOCK_SIZE = "search", BLOCK_M = "search", BLOCK_N = "search", BLOCK_K = "search",
               num_warps = "search", num_stages = "search" },
}
