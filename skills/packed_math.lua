-- bf16/fp16 math can issue two lanes per instruction when values stay packed.
return {
  name = "packed_math",
  category = "compute",
  intent = "Vectorized math on packed types: keep bf16/fp16 pairs together for elementwise steps "
    .. "that do not need fp32 accumulation.",
  applies = function(p, f)
    if (f.dtype == "bf16" or f.dtype == "fp16") and (p.sm_pct or 0) >= 60 then return 0.45 end
    return nil
  end,
  expected = { "sm__inst_executed.sum down" },
  avoid = { "accumulating reductions in bf16" },
}
