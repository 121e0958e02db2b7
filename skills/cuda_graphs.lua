-- Launch overhead matters only for microsecond-scale kernels.
return {
  name = "cuda_graphs",
  category = "launch",
  intent = "CUDA-graph capture: capture a fixed sequence of small launches once and replay it.",
  applies = function(p, f)
    if p.time_ms and p.time_ms < 0.02 and (p.kernel_count or 1) >= 2 then return 0.6 end
    return nil
  end,
  expected = { "host launch gaps down" },
  avoid = { "graphs around kernels that take milliseconds (no gain)" },
}
