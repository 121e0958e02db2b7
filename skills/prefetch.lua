-- Prefetching helps only when data is reused; on a pure stream it just adds traffic.
return {
  name = "prefetch",
  category = "memory",
  intent = "Software prefetching / pipelining: load the next tile while computing on the current one "
    .. "(num_stages > 1 in Triton loops), only for loops that reuse data.",
  -- the same change in CUDA C++ (--language cuda, agents/lib/skills.lua)
  intents = { cuda = "Software prefetching / pipelining: load the next tile into shared memory (`cp.async` "
    .. "with double buffering on sm_80+) while computing on the current one, only for loops that "
    .. "reuse data." },
  applies = function(p, f)
    if f.loops and f.reuse and (p.stall_long or 0) > 30 then return 0.6 end
    return nil
  end,
  expected = { "long-scoreboard stalls down", "time down" },
  avoid = { "prefetching streaming data with no reuse", "stages that overflow shared memory" },
  tunables = { num_stages = "up" },
}
