-- Loads that use only part of each 32-byte sector waste DRAM bandwidth; fixing the access order
-- is the cheapest large win for a memory-bound kernel.
return {
  name = "coalescing",
  category = "memory",
  intent = "Improve coalescing and transaction size: make consecutive lanes touch consecutive "
    .. "addresses (put the contiguous dimension on the fastest-varying index of the block), so each "
    .. "warp load fills whole 32-byte sectors.",
  applies = function(p, f)
    local c = p.coalescing
    if c and c < 80 then return 0.9 - c / 200 end
    if (p.dram_pct or 0) >= 60 and (p.l1_hit or 100) < 20 and c == nil then return 0.3 end
    return nil
  end,
  expected = { "coalescing (bytes per sector) up", "dram__bytes_read.sum down", "time down" },
  avoid = { "transposing in registers without changing the global access order",
            "strided tl.load along a non-contiguous dimension" },
}
