-- Masked tails and misaligned starts split vector loads; sizing blocks to the shape removes them.
return {
  name = "alignment_tails",
  category = "memory",
  intent = "Minimise alignment and tail cost: choose block sizes that divide the extent, keep "
    .. "pointers 16-byte aligned (tl.multiple_of / max_contiguous hints), and isolate the masked tail.",
  -- the same change in CUDA C++ (--language cuda, agents/lib/skills.lua)
  intents = { cuda = "Minimise alignment and tail cost: choose block sizes that divide the extent, keep "
    .. "pointers 16-byte aligned (check `data_ptr()` alignment on the host, "
    .. "`__builtin_assume_aligned`), and isolate the tail in its own guarded loop." },
  applies = function(p, f)
    if f.masked_loads and (p.coalescing or 100) < 95 then return 0.5 end
    if f.masked_loads and not p.has_metrics then return 0.2 end
    return nil
  end,
  expected = { "vectorized (128-bit) global loads", "instruction count down" },
  avoid = { "removing masks without proving the extent divides the block" },
}
