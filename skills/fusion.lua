-- Several kernels that pass a tensor through DRAM can become one.
return {
  name = "fusion",
  category = "structure",
  intent = "Kernel fusion: merge consecutive kernels (or a kernel and its PyTorch pre/post ops) so "
    .. "intermediates stay in registers; for reductions, fuse the statistics pass with the apply pass.",
  applies = function(p, f)
    local n = p.kernel_count or f.n_kernels or 1
    if p.traffic_ratio and p.traffic_ratio > 1.3 then return 0.9 end
    if n >= 2 then return 0.85 end
    if f.torch_compute then return 0.6 end
    if f.passes and f.passes >= 2 then return 0.5 end
    return nil
  end,
  expected = { "kernel count down", "dram bytes down (traffic_ratio towards 1)" },
  avoid = { "fusing into one program so large it serialises the reduction" },
}
