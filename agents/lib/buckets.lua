-- The retrieval rules of the skill policy (agents/lib/retrieval.lua reads them): bottleneck
-- buckets tried in order, each with the metric that limits the kernel in it and the skills it
-- allows by kernel structure. Edit this table to change what the skill policy may plan.
-- A profile field is nil when the profiler did not report it; rules treat nil as "no evidence".
--
-- detect(p, f) -> evidence list {{field, value}} when the bucket applies, else nil.
-- limiter(p) -> field, value: the utilisation whose headroom sets the tier.
-- allow[structure] -> skill names; allow["*"] when the structure does not matter. A name written
-- "skill?fp32" is allowed only for that dtype.
local function at_least(p, field, v) return p[field] ~= nil and p[field] >= v end

return {
  { name = "fallback",
    detect = function(p, f)
      if p.fallback then return { { "fallback", true } } end
      if f.torch_compute then return { { "torch_compute", true } } end
    end,
    allow = { ["*"] = { "multi_kernel_scheduling", "fusion" } } },

  -- the priority rule: DRAM or L2 at 80% of peak or more means bandwidth, whatever else fires
  { name = "memory_bandwidth",
    detect = function(p)
      if at_least(p, "dram_pct", 80) then return { { "dram_pct", p.dram_pct } } end
      if at_least(p, "l2_pct", 80) then return { { "l2_pct", p.l2_pct } } end
    end,
    limiter = function(p) if (p.dram_pct or 0) >= (p.l2_pct or 0) then return "dram_pct", p.dram_pct end return "l2_pct", p.l2_pct end,
    allow = { reduction = { "fusion", "vectorization", "alignment_tails", "memory_parallelism" },
              streaming = { "vectorization", "alignment_tails", "coalescing", "memory_parallelism" },
              stencil = { "smem_tiling", "coalescing", "vectorization" },
              reuse = { "smem_tiling", "register_blocking", "tensor_cores" },
              multi_kernel = { "fusion", "multi_kernel_scheduling" } } },

  -- a GEMM-shaped op (matmul with N > 1, convolution with a channel reduction) whose tensor pipe
  -- is idle needs a tiled tl.dot formulation before anything else pays
  { name = "gemm_tiling",
    detect = function(p, f)
      if f.structure == "reuse" and p.has_metrics and (p.tensor_pct or 0) < 10 then
        return { { "tensor_pct", p.tensor_pct or 0 }, { "op_class", f.op_class } }
      end
    end,
    limiter = function(p) return "sm_pct", p.sm_pct end,
    allow = { ["*"] = { "tensor_cores", "smem_tiling", "register_blocking", "tf32_gemm?fp32" } } },

  { name = "l1_saturated",
    detect = function(p) if at_least(p, "l1_pct", 80) then return { { "l1_pct", p.l1_pct }, { "coalescing", p.coalescing } } end end,
    limiter = function(p) return "l1_pct", p.l1_pct end,
    allow = { stencil = { "coalescing", "smem_tiling", "register_blocking", "vectorization" },
              reuse = { "smem_tiling", "register_blocking", "coalescing" },
              ["*"] = { "coalescing", "vectorization", "register_blocking", "alignment_tails" } } },

  { name = "register_pressure",
    detect = function(p)
      if at_least(p, "regs", 128) then return { { "regs", p.regs }, { "occupancy", p.occupancy } } end
      if p.occ_limit_regs and p.occ_limit_regs <= 4 and (p.occupancy or 100) < 30 then
        return { { "occ_limit_regs", p.occ_limit_regs }, { "occupancy", p.occupancy } }
      end
    end,
    limiter = function(p) return "occupancy", p.occupancy end,
    allow = { reduction = { "live_ranges", "fission", "less_unrolling", "occupancy_when_limited" },
              ["*"] = { "live_ranges", "less_unrolling", "smem_register_tradeoff", "occupancy_when_limited" } } },

  { name = "memory_latency",
    detect = function(p) if at_least(p, "stall_long", 40) then return { { "stall_long", p.stall_long }, { "dram_pct", p.dram_pct } } end end,
    limiter = function(p) return "dram_pct", p.dram_pct end,
    allow = { reduction = { "memory_parallelism", "ilp", "fission", "launch_tuning" },
              stencil = { "memory_parallelism", "smem_tiling", "ilp", "launch_tuning" },
              reuse = { "prefetch", "smem_tiling", "memory_parallelism" },
              multi_kernel = { "fusion", "memory_parallelism" },
              ["*"] = { "memory_parallelism", "ilp", "vectorization", "launch_tuning" } } },

  { name = "compute",
    detect = function(p) if at_least(p, "sm_pct", 60) and p.sm_pct > (p.dram_pct or 0) then return { { "sm_pct", p.sm_pct } } end end,
    limiter = function(p) return "sm_pct", p.sm_pct end,
    allow = { reuse = { "tensor_cores", "register_blocking", "reduce_instructions", "tf32_gemm?fp32" },
              ["*"] = { "reduce_instructions", "address_calc", "fast_math", "packed_math" } } },

  { name = "divergence",
    detect = function(p)
      if at_least(p, "stall_branch", 10) then return { { "stall_branch", p.stall_branch } } end
      -- 0% uniform means no branch targets were counted, not full divergence
      local u = p.branch_uniform_pct
      if u and u > 0 and u < 90 then return { { "branch_uniform_pct", u } } end
    end,
    limiter = function(p) return "sm_pct", p.sm_pct end,
    allow = { ["*"] = { "warp_uniform", "reduce_instructions" } } },

  { name = "launch_overhead",
    detect = function(p)
      if p.time_ms and p.time_ms < 0.02 then return { { "time_ms", p.time_ms }, { "kernel_count", p.kernel_count } } end
    end,
    allow = { ["*"] = { "cuda_graphs", "fusion", "multi_kernel_scheduling" } } },
}
