-- Occupancy matters only when latency is exposed and a resource limit is what caps it.
return {
  name = "occupancy_when_limited",
  category = "occupancy",
  intent = "Increase occupancy only where limited: if registers or shared memory cap resident "
    .. "warps and warps stall on memory, lower per-block usage (smaller tiles, fewer stages).",
  applies = function(p, f)
    local occ = p.occupancy
    local limited = (p.occ_limit_regs and p.occ_limit_regs < 8) or (p.occ_limit_smem and p.occ_limit_smem < 8)
    if occ and occ < 50 and limited and (p.stall_long or 0) > 30 then return 0.7 end
    return nil
  end,
  expected = { "sm__warps_active up", "launch__occupancy_limit_* up" },
  avoid = { "raising occupancy on a kernel already at DRAM peak" },
  tunables = { num_warps = "down", num_stages = "down" },
}
