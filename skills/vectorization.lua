-- Memory-bound kernels with scalar loads issue 4-8x more memory instructions than needed.
return {
  name = "vectorization",
  category = "memory",
  intent = "Refine vectorization: make each thread load 16 contiguous bytes (contiguous block "
    .. "dimension, aligned offsets, enough elements per thread) so loads compile to 128-bit accesses.",
  -- the same change in CUDA C++ (--language cuda, agents/lib/skills.lua)
  intents = { cuda = "Refine vectorization: make each thread load 16 contiguous bytes (`float4` / `__half2` "
    .. "loads through reinterpret_cast on aligned pointers) so loads compile to 128-bit "
    .. "accesses." },
  applies = function(p, f)
    if (p.dram_pct or 0) >= 40 and (p.dram_pct or 0) < 85 and (p.stall_short or 0) < 20 then
      return 0.55
    end
    if f.triton and not p.has_metrics then return 0.25 end
    return nil
  end,
  expected = { "sm__inst_executed.sum down", "dram__throughput up" },
  avoid = { "vector widths that break alignment for the tail" },
  tunables = { BLOCK_SIZE = "up" },
}
