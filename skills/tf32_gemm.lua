-- For fp32 problems, TF32 tensor-core math is much faster where the tolerance allows it.
return {
  name = "tf32_gemm",
  category = "compute",
  intent = "GEMM rewrite with TF32: allow_tf32 / input_precision='tf32' in tl.dot for fp32 inputs, "
    .. "checking the result still meets the fp32 tolerance.",
  -- the same change in CUDA C++ (--language cuda, agents/lib/skills.lua)
  intents = { cuda = "GEMM rewrite with TF32: WMMA fragments of `wmma::precision::tf32` for fp32 inputs (or "
    .. "cuBLASLt's TF32 compute type where --library allows a library), checking the result "
    .. "still meets the fp32 tolerance." },
  applies = function(p, f)
    if f.op_class == "gemm" and f.dtype == "fp32" and (p.sm_pct or 0) > 50 then return 0.5 end
    return nil
  end,
  expected = { "tensor pipe active", "time down" },
  avoid = { "TF32 on reductions with long K where error exceeds the tolerance" },
}
