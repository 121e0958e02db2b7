-- exp/log/div/sqrt in full precision are multi-instruction sequences.
return {
  name = "fast_math",
  category = "compute",
  intent = "Approximate transcendentals: use rsqrt instead of 1/sqrt, exp2 with a folded log2(e), "
    .. "and fast division where accuracy allows.",
  applies = function(p, f)
    if f.transcendental and (p.sm_pct or 0) >= 40 then return 0.55 end
    if f.transcendental and not p.has_metrics then return 0.2 end
    return nil
  end,
  expected = { "sm__inst_executed.sum down" },
  avoid = { "approximations whose error exceeds the dtype's tolerance" },
}
