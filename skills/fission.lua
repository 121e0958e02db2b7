-- One huge kernel can be worse than two simple ones when it spills or diverges.
return {
  name = "fission",
  category = "structure",
  intent = "Kernel fission: split a kernel whose phases need different launch shapes (e.g. a split "
    .. "reduction: partial sums across many programs, then a small finishing kernel).",
  applies = function(p, f)
    if f.op_class == "reduction" and (p.occupancy or 100) < 30 then return 0.55 end
    if (p.regs or 0) >= 200 then return 0.4 end
    return nil
  end,
  expected = { "occupancy up", "grid fills the GPU" },
  avoid = { "an extra pass over DRAM for a memory-bound op" },
}
