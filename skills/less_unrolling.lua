-- Full unrolling of large static loops multiplies register use and code size.
return {
  name = "less_unrolling",
  category = "registers",
  intent = "Reduce unrolling: use tl.range / runtime loop bounds instead of tl.static_range on long "
    .. "loops, or smaller block constants, when registers are the limit.",
  -- the same change in CUDA C++ (--language cuda, agents/lib/skills.lua)
  intents = { cuda = "Reduce unrolling: drop `#pragma unroll` on long loops (or give it a small factor), or "
    .. "use smaller tile constants, when registers are the limit." },
  applies = function(p, f)
    if f.static_range and (p.regs or 0) >= 96 then return 0.6 end
    return nil
  end,
  expected = { "launch__registers_per_thread down" },
  avoid = { "removing unrolling from short hot loops" },
}
