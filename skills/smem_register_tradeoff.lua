-- Moving a large per-thread array to shared memory (or back) rebalances two occupancy limits.
return {
  name = "smem_register_tradeoff",
  category = "registers",
  intent = "Shared-memory/register trade-off: move whichever resource caps occupancy to the other "
    .. "(stage big tiles in shared memory, or keep small reused values in registers).",
  applies = function(p, f)
    local r, s = p.occ_limit_regs, p.occ_limit_smem
    if r and s and math.abs(r - s) >= 4 and math.min(r, s) < 8 then return 0.45 end
    return nil
  end,
  expected = { "the lower occupancy limit rises" },
  avoid = { "shared-memory staging without reuse" },
}
