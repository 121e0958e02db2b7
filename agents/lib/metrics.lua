-- Turns an evaluator result's raw metrics into (a) a flat profile the skills' rules read and (b)
-- text grouped by section with units for prompts, instead of one raw dict (a known weakness of
-- pasting Nsight Compute output as-is).
local M = {}

-- short name -> candidate Nsight-Compute metric names (first present wins)
M.fields = {
  dram_pct = { "dram__throughput.avg.pct_of_peak_sustained_elapsed", "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed" },
  mem_sol_pct = { "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed" },
  sm_pct = { "sm__throughput.avg.pct_of_peak_sustained_elapsed" },
  l2_pct = { "lts__throughput.avg.pct_of_peak_sustained_active" },
  l1_pct = { "l1tex__throughput.avg.pct_of_peak_sustained_active" },
  l1_hit = { "l1tex__t_sector_hit_rate.pct" },
  l2_hit = { "lts__t_sector_hit_rate.pct" },
  occupancy = { "sm__warps_active.avg.pct_of_peak_sustained_active" },
  regs = { "launch__registers_per_thread" },
  occ_limit_regs = { "launch__occupancy_limit_registers" },
  occ_limit_smem = { "launch__occupancy_limit_shared_mem" },
  occ_limit_blocks = { "launch__occupancy_limit_blocks" },
  smem_per_block = { "launch__shared_mem_per_block_allocated" },
  tensor_pct = { "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
                 "sm__inst_executed_pipe_tensor.avg.pct_of_peak_sustained_active",
                 "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active" },
  coalescing = { "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct" },
  stall_long = { "smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct" },
  stall_short = { "smsp__warp_issue_stalled_short_scoreboard_per_warp_active.pct" },
  stall_barrier = { "smsp__warp_issue_stalled_barrier_per_warp_active.pct" },
  stall_branch = { "smsp__warp_issue_stalled_branch_resolving_per_warp_active.pct" },
  branch_uniform_pct = { "smsp__sass_average_branch_targets_threads_uniform.pct" },
  dram_read = { "dram__bytes_read.sum" },
  dram_write = { "dram__bytes_write.sum" },
  inst = { "sm__inst_executed.sum" },
}

-- Sections for prompts: a "## title" line, then one "metric | unit | meaning" line per metric.
local SECTIONS = [[
## Speed of light
gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed | % | memory SOL
sm__throughput.avg.pct_of_peak_sustained_elapsed | % | compute SOL
## DRAM
dram__throughput.avg.pct_of_peak_sustained_elapsed | % | DRAM bandwidth used
gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed | % | DRAM bandwidth used (gpu)
dram__bytes_read.sum | bytes | read from DRAM
dram__bytes_write.sum | bytes | written to DRAM
dram__bytes.sum.per_second | bytes/s | DRAM rate
## Caches
l1tex__throughput.avg.pct_of_peak_sustained_active | % | L1 throughput
l1tex__t_sector_hit_rate.pct | % | L1 hit rate
lts__throughput.avg.pct_of_peak_sustained_active | % | L2 throughput
lts__t_sector_hit_rate.pct | % | L2 hit rate
smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct | % | bytes used per loaded sector (coalescing)
## Compute
sm__inst_executed.sum | inst | instructions executed
sm__cycles_active.avg | cycles | SM active cycles
sm__inst_executed_pipe_tensor.avg.pct_of_peak_sustained_active | % | tensor pipe instructions
sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed | % | tensor pipe active
## Occupancy and launch
sm__warps_active.avg.pct_of_peak_sustained_active | % | achieved occupancy
launch__registers_per_thread | regs | registers per thread
launch__shared_mem_per_block_allocated | bytes | shared memory per block
launch__occupancy_limit_blocks | blocks/SM | limit by block count
launch__occupancy_limit_registers | blocks/SM | limit by registers
launch__occupancy_limit_shared_mem | blocks/SM | limit by shared memory
## Warp stalls (share of active warps' cycles)
smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct | % | waiting on global/local memory
smsp__warp_issue_stalled_short_scoreboard_per_warp_active.pct | % | waiting on shared memory/MUFU
smsp__warp_issue_stalled_barrier_per_warp_active.pct | % | waiting at barriers
smsp__warp_issue_stalled_branch_resolving_per_warp_active.pct | % | branch resolution
smsp__sass_average_branch_targets_threads_uniform.pct | % | warp-uniform branches
]]

-- M.sections = {{title, {{metric, unit, meaning}, ...}}, ...}
M.sections = {}
for line in SECTIONS:gmatch("[^\n]+") do
  local title = line:match("^## (.+)$")
  if title then
    M.sections[#M.sections + 1] = { title, {} }
  else
    local metric, unit, meaning = line:match("^(%S+) | (%S+) | (.+)$")
    local rows = M.sections[#M.sections][2]
    rows[#rows + 1] = { metric, unit, meaning }
  end
end

local function is_metric_map(t)
  for k, v in pairs(t) do
    if type(v) == "number" and type(k) == "string" and k:find("__", 1, true) then return true end
  end
  return false
end

-- per_kernel(metrics) -> {kernel_name = {metric = value}} whether the evaluator gave the
-- Nsight-Compute layout ({metrics={kernel={...}}}), a per-kernel map, or one flat map.
function M.per_kernel(metrics)
  if type(metrics) ~= "table" then return {} end
  if type(metrics.metrics) == "table" then metrics = metrics.metrics end
  if is_metric_map(metrics) then return { all = metrics } end
  local out = {}
  for k, v in pairs(metrics) do
    if type(v) == "table" and is_metric_map(v) then out[k] = v end
  end
  return out
end

-- flat(result) -> {metric = value} over the whole forward, or nil. The evaluator aggregates the
-- kernels once (time-weighted rates, summed counters: kagent_eval/profile/ncu_metrics.py) and returns it
-- as result.profile.aggregate; this file only reads it. A trace with a single kernel (such as the
-- published *_ncu_metrics.json files) is its own aggregate; several kernels without the
-- evaluator's aggregate give none, rather than a second rule for combining them.
function M.flat(result)
  local prof = type(result) == "table" and result.profile
  if type(prof) == "table" and type(prof.aggregate) == "table" and next(prof.aggregate) then
    return prof.aggregate
  end
  local pk = M.per_kernel(result and result.metrics)
  local only, n = nil, 0
  for _, m in pairs(pk) do only, n = m, n + 1 end
  if n == 1 then return only end
  return nil
end

-- summarize(result) -> profile: the short fields above plus time_ms, sol_pct, kernel_count,
-- fallback, has_metrics. Fields the profiler did not report stay nil (CPU mode reports none).
function M.summarize(result)
  result = result or {}
  local flat = M.flat(result) or {}
  local p = { has_metrics = next(flat) ~= nil }
  for short, names in pairs(M.fields) do
    for _, n in ipairs(names) do
      if flat[n] ~= nil then p[short] = flat[n]; break end
    end
  end
  local t = result.time_ms
  p.time_ms = type(t) == "table" and t.median or t
  p.sol_pct = result.roofline and result.roofline.sol_pct or nil
  -- DRAM bytes moved over the compulsory bytes: > 1 means extra passes or poor reuse
  local cb = result.roofline and result.roofline.bytes
  if cb and cb > 0 and (p.dram_read or p.dram_write) then
    p.traffic_ratio = ((p.dram_read or 0) + (p.dram_write or 0)) / cb
  end
  local nk = 0
  for _ in pairs(M.per_kernel(result.metrics)) do nk = nk + 1 end
  if result.kernels and #result.kernels > 0 then nk = #result.kernels end
  p.kernel_count = nk > 0 and nk or nil
  p.fallback = result.fallback or (result.audit and result.audit.fallback) or nil
  return p
end

local function fmt_value(v, unit)
  if type(v) ~= "number" then return tostring(v) end
  if unit == "bytes" or unit == "bytes/s" then
    local a = math.abs(v)
    if a >= 1e9 then return string.format("%.3f G%s", v / 1e9, unit) end
    if a >= 1e6 then return string.format("%.3f M%s", v / 1e6, unit) end
    if a >= 1e3 then return string.format("%.3f K%s", v / 1e3, unit) end
    return string.format("%d %s", v, unit)
  end
  if unit == "%" then return string.format("%.2f%%", v) end
  if v == math.floor(v) then return string.format("%d %s", v, unit) end
  return string.format("%.4g %s", v, unit)
end

-- grouped_text(result) -> Markdown: per kernel (time-ordered), metrics under section headings with
-- units and meanings; "no hardware counters" when the profiler reported none.
function M.grouped_text(result)
  local pk = M.per_kernel(result and result.metrics)
  local names = {}
  for n in pairs(pk) do names[#names + 1] = n end
  if #names == 0 then
    return "(no hardware counters were collected for this kernel: CPU mode or profiler unavailable; "
      .. "reason from the code, the timing and the roofline)"
  end
  local ktime = {}
  for _, k in ipairs((result and result.kernels) or {}) do ktime[k.name or ""] = k.time_ms end
  table.sort(names, function(a, b) return (ktime[a] or 0) > (ktime[b] or 0) or ((ktime[a] or 0) == (ktime[b] or 0) and a < b) end)
  local out = {}
  for _, n in ipairs(names) do
    local m = pk[n]
    out[#out + 1] = string.format("### kernel `%s`%s", n, ktime[n] and string.format(" (%.4f ms)", ktime[n]) or "")
    local used = {}
    for _, sec in ipairs(M.sections) do
      local lines = {}
      for _, e in ipairs(sec[2]) do
        if m[e[1]] ~= nil then
          used[e[1]] = true
          lines[#lines + 1] = string.format("- %s = %s (%s)", e[1], fmt_value(m[e[1]], e[2]), e[3])
        end
      end
      if #lines > 0 then
        out[#out + 1] = "**" .. sec[1] .. "**"
        for _, l in ipairs(lines) do out[#out + 1] = l end
      end
    end
    local other = {}
    for k, v in pairs(m) do if not used[k] then other[#other + 1] = string.format("- %s = %s", k, tostring(v)) end end
    if #other > 0 then
      table.sort(other)
      out[#out + 1] = "**Other**"
      for _, l in ipairs(other) do out[#out + 1] = l end
    end
  end
  return table.concat(out, "\n")
end

-- roofline_text(result) -> one paragraph on the lower bound and speed-of-light.
function M.roofline_text(result)
  local r = result and result.roofline
  local t = result and result.time_ms
  local med = type(t) == "table" and t.median or t
  if type(r) ~= "table" then
    return med and string.format("Measured median %.4f ms; no roofline bound available.", med)
      or "No timing or roofline available."
  end
  local parts = {}
  if r.bytes then parts[#parts + 1] = string.format("compulsory traffic %.3f MB", r.bytes / 1e6) end
  if r.flops then parts[#parts + 1] = string.format("%.3f GFLOP", r.flops / 1e9) end
  if r.lower_bound_ms then parts[#parts + 1] = string.format("lower bound %.4f ms", r.lower_bound_ms) end
  if med then parts[#parts + 1] = string.format("measured median %.4f ms", med) end
  if r.sol_pct then parts[#parts + 1] = string.format("speed-of-light %.1f%%", r.sol_pct) end
  return table.concat(parts, "; ") .. "."
end

return M
