-- Computing several outputs per thread reuses loaded operands from registers.
return {
  name = "register_blocking",
  category = "compute",
  intent = "Register blocking: compute a small tile of outputs per thread so each loaded operand "
    .. "feeds several FMAs.",
  applies = function(p, f)
    if f.reuse and (p.l1_pct or 0) > 60 and (p.regs or 0) < 128 then return 0.6 end
    return nil
  end,
  expected = { "l1tex__throughput down", "instructions per output down" },
  avoid = { "tiles so large registers spill (local memory traffic)" },
}
