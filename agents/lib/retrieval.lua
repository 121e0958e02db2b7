-- Skill retrieval by rules (the skill policy, agents/policies/skill.lua): the profile picks a
-- bottleneck bucket (agents/lib/buckets.lua, first that applies; DRAM or L2 >= 80% first of
-- all), the headroom of the bucket's limiting metric gives the tier, the kernel's structure picks
-- the allowed skills, and the learned record ranks them (agents/lib/skills.lua, rank). The
-- decision is a plain table, written to the trace as it is.
local json = require("kagent.json")
local buckets = require("agents.lib.buckets")
local metrics = require("agents.lib.metrics")
local skills_lib = require("agents.lib.skills")

local M = {}

-- Without hardware counters (CPU mode) only the structure is known.
M.UNPROFILED = {
  reduction = { "fusion", "ilp", "vectorization", "launch_tuning" },
  stencil = { "smem_tiling", "register_blocking", "launch_tuning" },
  reuse = { "tensor_cores", "smem_tiling", "launch_tuning" },
  multi_kernel = { "fusion", "multi_kernel_scheduling" },
  streaming = { "vectorization", "ilp", "launch_tuning" },
}

-- structure(p, f) -> multi_kernel | reduction | stencil | reuse | streaming
function M.structure(p, f)
  if (p.kernel_count or f.n_kernels or 1) >= 2 then return "multi_kernel" end
  if f.op_class == "reduction" then return "reduction" end
  if f.op_class == "pool" or f.depthwise then return "stencil" end
  if f.reuse then return "reuse" end
  return "streaming"
end

-- tier(v) -> headroom of a utilisation percent: high (< 60), medium (60..80), low (> 80)
function M.tier(v)
  if type(v) ~= "number" then return "unknown" end
  if v < 60 then return "high" end
  if v <= 80 then return "medium" end
  return "low"
end

local function evidence_rows(list)
  local out = {}
  for _, e in ipairs(list or {}) do
    local names = metrics.fields[e[1]]
    out[#out + 1] = { field = e[1], metric = names and names[1] or e[1], value = e[2] }
  end
  return out
end

-- classify(p, f) -> {bucket, evidence, limiter, tier, structure, signals}
function M.classify(p, f)
  local structure = M.structure(p, f)
  local fx = setmetatable({ structure = structure }, { __index = f })
  local d = { structure = structure, signals = {} }
  for _, sig in ipairs({ { "stall_long", 40 }, { "regs", 128 }, { "traffic_ratio", 1.1 } }) do
    if (p[sig[1]] or 0) >= sig[2] then d.signals[#d.signals + 1] = { field = sig[1], value = p[sig[1]] } end
  end
  if (p.occupancy or 100) < 30 then d.signals[#d.signals + 1] = { field = "occupancy", value = p.occupancy } end
  if (p.coalescing or 100) < 60 then d.signals[#d.signals + 1] = { field = "coalescing", value = p.coalescing } end
  if not p.has_metrics and not p.fallback and not f.torch_compute then
    d.bucket, d.tier, d.evidence = "unprofiled", "unknown", {}
    d.allowed_by = M.UNPROFILED[structure]
    return d
  end
  for _, b in ipairs(buckets) do
    local ev = b.detect(p, fx)
    if ev then
      d.bucket, d.evidence, d.rule = b.name, evidence_rows(ev), b
      break
    end
  end
  if not d.bucket then
    -- nothing saturated and no stall dominates: latency-bound by default
    d.bucket, d.evidence = "memory_latency", evidence_rows({ { "dram_pct", p.dram_pct }, { "sm_pct", p.sm_pct } })
    for _, b in ipairs(buckets) do if b.name == "memory_latency" then d.rule = b end end
  end
  if d.rule.limiter then
    local field, value = d.rule.limiter(p)
    d.limiter = { field = field, value = value }
    d.tier = M.tier(value)
  else
    d.tier = "high"
  end
  d.allowed_by = d.rule.allow[structure] or d.rule.allow["*"]
  d.rule = nil
  return d
end

-- retrieve(skills, p, f, stats) -> decision: classify() plus allowed (names) and ranked
-- ({skill name, score, prior, record, why}, best first) and why (one sentence). stats: the
-- learned records {name = {attempts, successes, median_gain}}, or a function(bucket) giving them
-- for the bucket found.
function M.retrieve(skills, p, f, stats)
  local d = M.classify(p, f)
  if type(stats) == "function" then stats = stats(d.bucket) end
  local by_name = {}
  for _, s in ipairs(skills) do by_name[s.name] = s end
  local items = {}
  d.allowed = {}
  for _, entry in ipairs(d.allowed_by or {}) do
    local name, dtype = entry:match("^([^?]+)%??(.*)$")
    local s = by_name[name]
    if s and (dtype == "" or dtype == f.dtype) then
      local ok, prior = pcall(s.applies, p, f)
      items[#items + 1] = { skill = s, prior = ok and type(prior) == "number" and prior or 0 }
      d.allowed[#d.allowed + 1] = name
    end
  end
  d.allowed_by = nil
  skills_lib.rank(items, stats)
  d.ranked = {}
  for i, it in ipairs(items) do
    d.ranked[i] = { skill = it.skill.name, score = it.score, prior = it.prior, record = it.record, why = it.why }
  end
  local ev = {}
  for _, e in ipairs(d.evidence) do ev[#ev + 1] = string.format("%s=%s", e.field, tostring(e.value)) end
  for _, k in ipairs({ "evidence", "signals", "allowed", "ranked" }) do
    if #d[k] == 0 then d[k] = json.empty_array end -- lists stay lists in the JSON trace
  end
  d.why = string.format("bucket %s%s, tier %s%s, structure %s: allowed %s", d.bucket,
    #ev > 0 and (" (" .. table.concat(ev, ", ") .. ")") or "",
    d.tier, d.limiter and string.format(" (%s %.1f%%)", d.limiter.field, d.limiter.value or 0) or "", d.structure,
    table.concat(d.allowed, ", "))
  return d, items
end

return M
