-- A kernel far below DRAM peak with warps stalled on long scoreboards has too few loads in flight.
return {
  name = "memory_parallelism",
  category = "memory",
  intent = "Increase memory-level parallelism: issue more independent loads before their first use "
    .. "(several rows or tiles per program, loads hoisted above the math), so DRAM latency overlaps.",
  applies = function(p, f)
    local dram, stall = p.dram_pct, p.stall_long
    if dram and dram < 60 and (stall or 0) > 40 then return 0.85 end
    if dram and dram < 80 and (stall or 0) > 60 then return 0.6 end
    -- low headroom tier: near DRAM peak, only a small gain is left
    if dram and dram < 90 and (stall or 0) > 80 then return 0.35 end
    return nil
  end,
  expected = { "dram__throughput up", "long-scoreboard stalls down" },
  avoid = { "raising occupancy by shrinking blocks so much that each program issues one load" },
  tunables = { BLOCK_SIZE = "up", ROWS_PER_PROGRAM = "up" },
}
