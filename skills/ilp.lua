-- Few independent operations per thread leave the schedulers waiting on latency.
return {
  name = "ilp",
  category = "latency",
  intent = "Increase work per thread (ILP): process several elements or rows per program with "
    .. "independent accumulators so loads and math overlap.",
  applies = function(p, f)
    if (p.stall_long or 0) > 40 and (p.occupancy or 100) < 60 then return 0.65 end
    if (p.stall_short or 0) > 30 then return 0.5 end
    if not p.has_metrics then return 0.3 end
    return nil
  end,
  expected = { "stall ratios down", "time down" },
  avoid = { "so much work per program that the grid no longer fills the GPU" },
  tunables = { BLOCK_SIZE = "up", ROWS_PER_PROGRAM = "up" },
}
