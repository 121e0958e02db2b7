-- Measurements kept in the memory database and reused across runs and sweeps (table
-- `measurements`, db:measurement_get/put): a problem's baselines and a kernel's confirmation
-- verdicts. Each is keyed by everything it depends on, so a changed problem, dtype, GPU model,
-- driver, torch or Triton makes a new key and the figure is measured again.
--   baselines     eager, torch.compile and max-autotune medians: problem source hash (it defines
--                 get_inputs) and input seed, dtype, environment. Reused only after a cheap eager
--                 re-check agrees within RECHECK_TOLERANCE (agents/search/confirm.lua).
--   confirmation  the sanitizer's and the resized problem's verdicts on a kernel: its fingerprint,
--                 the problem, dtype, environment. The figure itself is always re-timed.
local json = require("kagent.json")
local baselines = require("agents.lib.baselines")
local proc = require("kagent.proc")
local fingerprint = require("agents.lib.fingerprint")

local M = {}

-- the eager re-check that lets cached baselines stand: within 2% of the cached eager median
M.RECHECK_TOLERANCE = 0.02

-- driver(gpu) -> the NVIDIA driver version of a pool GPU (nvidia-smi), "cpu" in CPU mode,
-- "unknown" when nvidia-smi does not say
local function driver(gpu)
  if not gpu then return "cpu" end
  local r = proc.run({ "nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader", "-i", gpu.visible },
    { timeout = 30 })
  local v = r and r.code == 0 and tostring(r.stdout):match("^%s*(%S+)")
  return v or "unknown"
end

-- env(run) -> {gpu, driver, torch, triton}: what a figure measured on this pool depends on
-- beyond the problem. Read once per run (the pool's first device speaks for its GPUs).
local envs = setmetatable({}, { __mode = "k" })
function M.env(run)
  if envs[run] then return envs[run] end
  local d = run.devices and run.devices[1] or {}
  local e = { gpu = run.device_name or "unknown", driver = driver(d.gpu), torch = tostring(d.torch or "unknown"),
    triton = tostring(d.triton or "none") }
  envs[run] = e
  return e
end

local function key_of(t)
  return fingerprint.hash(json.encode(t, { sort_keys = true }))
end

-- baselines_key(run) -> the key of the run's problem's baselines
function M.baselines_key(run)
  return key_of({ problem = fingerprint.hash(run.problem_code or ""), seed = (run.job_defaults or {}).seed,
    dtype = run.dtype, env = M.env(run) })
end

-- confirmation_key(run, code, fp) -> the key of a kernel's confirmation verdicts
function M.confirmation_key(run, code, fp)
  return key_of({ kernel = fp or fingerprint.of(code), problem = fingerprint.hash(run.problem_code or ""),
    dtype = run.dtype, env = M.env(run) })
end

local function get(run, kind, key)
  if not (run.db and run.db.measurement_get) then return nil end
  local v = run.db:measurement_get(kind, key)
  return type(v) == "table" and v or nil
end

local function put(run, kind, key, value)
  if not (run.db and run.db.measurement_put) then return end
  local ok, err = run.db:measurement_put(kind, key, value)
  if not ok and run.mem and run.mem.failed then run.mem:failed(err) end  -- stops the run (agents/run/writes.lua)
end

-- baselines(run) -> the cached baselines {eager_ms, compile_ms, compile_max_autotune_ms, times},
-- or nil
function M.baselines(run)
  return get(run, "baselines", M.baselines_key(run))
end

-- put_baselines(run, result[, names]): the baselines an evaluator result measured (or only
-- `names` of them) join those cached (a figure measured now replaces the cached one of the same
-- name)
function M.put_baselines(run, r, names)
  local v = M.baselines(run) or { times = {} }
  v.times = v.times or {}
  local any = false
  for _, n in ipairs(names or baselines.all(run)) do
    if type(r[n .. "_ms"]) == "number" then
      v[n .. "_ms"] = r[n .. "_ms"]
      v.times[n] = r.baseline_times and r.baseline_times[n] or json.null
      any = true
    end
  end
  if any then put(run, "baselines", M.baselines_key(run), v) end
end

-- has(cached, names) -> whether the cached baselines hold every name
function M.has(cached, names)
  if not cached then return false end
  for _, n in ipairs(names) do
    if type(cached[n .. "_ms"]) ~= "number" then return false end
  end
  return true
end

-- missing(cached, names) -> the names the cached baselines lack, in order
function M.missing(cached, names)
  local out = {}
  for _, n in ipairs(names) do
    if type(cached[n .. "_ms"]) ~= "number" then out[#out + 1] = n end
  end
  return out
end

-- agrees(cached, r) -> true, or false, why: the eager median of result r against the cached one
function M.agrees(cached, r)
  local now, was = r.eager_ms, cached.eager_ms
  if type(now) ~= "number" then return false, "the re-check measured no eager time" end
  local off = math.abs(now - was) / was
  if off <= M.RECHECK_TOLERANCE then return true end
  return false, string.format("eager %.4f ms now vs %.4f ms cached (%.1f%% > %g%%)", now, was, off * 100,
    M.RECHECK_TOLERANCE * 100)
end

-- fill(r, src, names): result r takes the baselines `names` from src (cached figures or another
-- job's result) and its speedups over them, as the evaluator computes them
function M.fill(r, src, names)
  local med = r.time_ms and r.time_ms.median
  r.baseline_times = r.baseline_times or {}
  for _, n in ipairs(names) do
    local ms = src[n .. "_ms"]
    if type(ms) == "number" then
      r[n .. "_ms"] = ms
      local t = src.times and src.times[n] or (src.baseline_times and src.baseline_times[n])
      if t ~= nil then r.baseline_times[n] = t end
      if type(med) == "number" and med > 0 then r["speedup_vs_" .. n] = ms / med end
    end
  end
end

-- confirmation(run, code, fp) -> the cached verdicts {sanitizer, generalizes} of a kernel, or nil
function M.confirmation(run, code, fp)
  return get(run, "confirmation", M.confirmation_key(run, code, fp))
end

-- put_confirmation(run, code, fp, result): the verdicts of a confirmation that passed
function M.put_confirmation(run, code, fp, r)
  put(run, "confirmation", M.confirmation_key(run, code, fp), { sanitizer = r.sanitizer or json.null,
    generalizes = r.generalizes or json.null, trust = r.trust or json.null })
end

return M
