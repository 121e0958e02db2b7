-- Integer index math (div/mod per element) can dominate a memory-bound kernel's instruction stream.
return {
  name = "address_calc",
  category = "compute",
  intent = "Reduce address-calculation overhead: hoist index math out of loops, replace per-element "
    .. "div/mod by 2-D program ids or incremental pointers, and use 32-bit offsets where extents allow.",
  applies = function(p, f)
    if f.divmod and (p.sm_pct or 0) > (p.dram_pct or 0) then return 0.7 end
    if f.divmod then return 0.35 end
    return nil
  end,
  expected = { "sm__inst_executed.sum down", "sm__throughput down with time" },
  avoid = { "32-bit offsets on tensors with more than 2^31 elements" },
}
