-- Matrix math on FP32 pipes leaves tensor cores idle; tl.dot reaches them.
return {
  name = "tensor_cores",
  category = "compute",
  intent = "Use tensor cores: express the inner product as tl.dot on tiles with K a multiple of 16 "
    .. "(bf16/fp16 inputs, fp32 accumulation), or call a vendor GEMM only where the problem allows it.",
  -- the same change in CUDA C++ (--language cuda, agents/lib/skills.lua)
  intents = { cuda = "Use tensor cores: express the inner product with WMMA (`nvcuda::wmma`) or `mma.sync` "
    .. "fragments on tiles with K a multiple of 16 (bf16/fp16 inputs, fp32 accumulation), or "
    .. "call a vendor GEMM only where --library allows it." },
  applies = function(p, f)
    if f.op_class == "gemm" or f.op_class == "conv" then
      if (p.tensor_pct or 0) < 10 then return 0.85 end
      return 0.3
    end
    return nil
  end,
  expected = { "sm__pipe_tensor_cycles_active up", "time down" },
  avoid = { "tl.dot on matrix-vector products (N=1): bandwidth bound, not compute bound" },
}
