-- Registers held across long stretches of code cap occupancy and cause spills.
return {
  name = "live_ranges",
  category = "registers",
  intent = "Reduce live ranges: load values just before use, recompute cheap values instead of "
    .. "keeping them, and split long loops so fewer values are live at once.",
  applies = function(p, f)
    if (p.regs or 0) >= 128 then return 0.7 end
    if (p.regs or 0) >= 96 and (p.occupancy or 100) < 40 then return 0.5 end
    return nil
  end,
  expected = { "launch__registers_per_thread down", "occupancy up" },
  avoid = { "recomputing expensive values (transcendentals) to save a register" },
}
