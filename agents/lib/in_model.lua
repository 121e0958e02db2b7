-- A kernel timed inside a whole model (docs/lua-api.md, the job field `in_model`): the one place where
-- agents/integrate.lua and the searches' --objective in-model build the evaluator's in-model
-- benchmark job and read its figure. The job's problem is the model and its reference the
-- original model; its candidate is the kernel, put by the evaluator in place of the model's
-- submodules at `paths` (or of class `class`), so the trials, the rotated and checked timed calls,
-- the spread rule and the re-measure of every benchmark job judge the model with the kernel in it.
local M = {}

-- job(o) -> the benchmark job: o.model, o.kernel (path or source), o.kernel_problem, o.paths (a
-- list) or o.class, o.adapter (optional), o.dtype, o.timeout, o.seed (optional). Only the
-- original model is timed beside it (eager): its median is the model's time without the kernel.
-- library "any" and no audit: the kernel's own share of the GPU time was judged alone, and in a
-- model the model's other operations carry most of it.
function M.job(o)
  local fs = require("kagent.fs")
  -- a kernel path the worker's sandbox reads as the job runs: absolute (source text stays text)
  local kernel = (not o.kernel:find("\n") and fs.exists(o.kernel)) and fs.abspath(o.kernel) or o.kernel
  local function abs(p) return p and fs.abspath(p) end
  return { problem = abs(o.model), candidate = kernel, dtype = o.dtype, seed = o.seed, timeout = o.timeout,
    library = "any", audit = false, properties = false, bench = { baselines = { "eager" } },
    in_model = { kernel_problem = abs(o.kernel_problem), paths = o.paths, match_class = o.class, adapter = abs(o.adapter) } }
end

-- figure(r) -> what an in-model benchmark result says: {ok, error, model_ms_after (the model
-- with the kernel: the median), p10, p90, spread, n, model_ms_before (the original model's
-- median), speedup (before / after), flags, trust}; ok is false with the evaluator's error where
-- the job refused the kernel in the model (no figure then)
function M.figure(r)
  local t = r and r.time_ms or {}
  if not (r and r.ok and type(t.median) == "number") then
    return { ok = false, error = tostring(r and r.error or "the in-model job returned nothing") }
  end
  return { ok = true, model_ms_after = t.median, p10 = t.p10, p90 = t.p90, spread = t.spread, n = t.n,
    model_ms_before = r.eager_ms, speedup = r.speedup_vs_eager, flags = r.flags, trust = r.trust }
end

-- check_options(opts) -> true | nil, message: --objective in-model needs --model-file (a file),
-- one of --model-class and --model-path, and the interleaved gate (which times kernels alone)
-- gives way to the noise gate on the in-model figures
function M.check_options(opts)
  if opts.objective ~= "in-model" then
    for _, k in ipairs({ "model_file", "model_class", "model_path", "model_adapter" }) do
      if opts[k] ~= nil then return nil, "--" .. k:gsub("_", "-") .. " is for --objective in-model" end
    end
    return true
  end
  for _, k in ipairs({ "model_file", "model_adapter" }) do
    if (k == "model_file" or opts[k] ~= nil) and not (opts[k] and require("kagent.fs").exists(opts[k])) then
      return nil, string.format("--objective in-model: --%s must name a file (got %s)", k:gsub("_", "-"), tostring(opts[k]))
    end
  end
  if (opts.model_class == nil) == (opts.model_path == nil) then
    return nil, "--objective in-model: give one of --model-class and --model-path (the submodules the kernel replaces)"
  end
  opts.gate = "noise"
  return true
end

-- rank_by_model(run, code, res) -> res judged in the model: a verified kernel-alone result `res`
-- gets the in-model job's figure as its ranking figure (time_ms), its own figures kept under
-- res.kernel = {time_ms, speedup_vs_eager, speedup_vs_compile} and the in-model figure's summary
-- under res.in_model (figure()); a kernel the in-model job refuses is refused (stage "in_model")
function M.rank_by_model(run, code, res)
  if not (res and res.ok) then return res end
  local o = run.opts
  local paths
  if o.model_path then
    paths = {}
    for p in o.model_path:gmatch("[^,%s]+") do paths[#paths + 1] = p end
  end
  local r = run.pool:benchmark(M.job({ model = o.model_file, kernel = code, kernel_problem = run.problem_path,
    paths = paths, class = o.model_class, adapter = o.model_adapter, dtype = run.dtype, timeout = o.job_timeout }))
  local fig = M.figure(r)
  if not fig.ok then
    return { ok = false, stage = "in_model", error = "the kernel verified alone, but in the model (" .. o.model_file
      .. ") it was refused: " .. fig.error, kernel = { time_ms = res.time_ms, speedup_vs_eager = res.speedup_vs_eager } }
  end
  res.kernel = { time_ms = res.time_ms, speedup_vs_eager = res.speedup_vs_eager, speedup_vs_compile = res.speedup_vs_compile }
  res.in_model = fig
  res.time_ms = r.time_ms
  -- the baselines and speedups are the model's: the original model (eager) over the model with
  -- the kernel; the kernel problem's compiled baselines say nothing of the model
  for _, n in ipairs(require("agents.lib.baselines").all(run)) do res[n .. "_ms"], res["speedup_vs_" .. n] = nil, nil end
  res.baseline_times = { eager = r.baseline_times and r.baseline_times.eager }
  res.eager_ms, res.speedup_vs_eager = fig.model_ms_before, fig.speedup
  return res
end

-- text(res) -> "kernel alone 0.0123 ms (1.50x eager), in the model 1.2345 ms (1.02x the model)"
-- for a result ranked by the model, nil for any other
function M.text(res)
  if not (res and res.in_model and res.kernel) then return nil end
  local k = res.kernel.time_ms or {}
  return string.format("kernel alone %.4f ms (%s eager), in the model %.4f ms (%s the model; p10-p90 %.4f-%.4f)",
    k.median or 0 / 0, type(res.kernel.speedup_vs_eager) == "number" and string.format("%.2fx", res.kernel.speedup_vs_eager) or "-",
    res.in_model.model_ms_after, type(res.in_model.speedup) == "number" and string.format("%.2fx", res.in_model.speedup) or "-",
    res.in_model.p10 or 0 / 0, res.in_model.p90 or 0 / 0)
end

return M
