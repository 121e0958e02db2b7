-- Compute-bound elementwise code often carries redundant conversions and recomputation.
return {
  name = "reduce_instructions",
  category = "compute",
  intent = "Reduce instruction count: precompute constants, avoid repeated dtype conversions, fold "
    .. "multiplies by reciprocals, and drop redundant masks.",
  applies = function(p, f)
    local sm, dram = p.sm_pct, p.dram_pct or 0
    if sm and sm >= 60 and sm > dram then return 0.75 end
    return nil
  end,
  expected = { "sm__inst_executed.sum down", "sm__throughput down with time" },
  avoid = { "reassociating reductions beyond the tolerance" },
}
