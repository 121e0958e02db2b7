-- Many small launches or a library fallback leave the GPU idle between kernels.
return {
  name = "multi_kernel_scheduling",
  category = "launch",
  intent = "Multi-kernel scheduling: order and size the kernels so none leaves the GPU idle, and "
    .. "replace any PyTorch/library call doing the real work by the candidate's own kernel.",
  applies = function(p, f)
    if p.fallback then return 0.95 end
    if (p.kernel_count or 1) >= 3 then return 0.5 end
    return nil
  end,
  expected = { "kernel count down", "own kernels carry the GPU time" },
  avoid = { "keeping ATen/cuBLAS calls for the main computation" },
}
