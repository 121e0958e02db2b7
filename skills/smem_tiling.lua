-- Reuse-friendly ops (GEMM, conv, stencils) re-read global data; tiling keeps it on chip.
return {
  name = "smem_tiling",
  category = "memory",
  intent = "Shared-memory tiling: stage tiles that several outputs reuse (blocked tl.dot loops, halo "
    .. "tiles for stencils) so each global byte is read once per block.",
  -- the same change in CUDA C++ (--language cuda, agents/lib/skills.lua)
  intents = { cuda = "Shared-memory tiling: stage tiles that several outputs reuse in `__shared__` arrays "
    .. "(blocked GEMM loops with `__syncthreads()`, halo tiles for stencils) so each global byte "
    .. "is read once per block." },
  applies = function(p, f)
    if f.reuse and ((p.l2_pct or 0) > 60 or (p.l1_pct or 0) > 60) then return 0.8 end
    if f.reuse and (p.dram_pct or 0) > 50 then return 0.6 end
    if f.reuse and not p.has_metrics then return 0.3 end
    return nil
  end,
  expected = { "lts__throughput down", "dram__bytes_read.sum down" },
  avoid = { "tiles too large for shared memory (occupancy limit 1)" },
  tunables = { BLOCK_M = "up", BLOCK_N = "up", BLOCK_K = "up" },
}
