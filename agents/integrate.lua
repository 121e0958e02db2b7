-- agents/integrate.lua: a verified kernel checked inside a whole model.
--   kagent-rt agents/integrate.lua --kernel K --kernel-problem P --model M.py (--class NAME | --path a.b)
--       [--adapter A.py] [--dtype fp32] [--devices cpu|0] [--shrink] [--reps 20] [--out runs]
-- Every submodule of the model of class NAME (or the one at the dotted path) that the kernel
-- computes — checked on the inputs the model gives it — is replaced by the kernel (through the
-- adapter's adapt(kernel, target) where the kernel was written for another layout); the whole
-- model's output must stay the model's (pool:analyze kind "integrate",
-- src/gpu/eval/kagent_eval/analyze/integrate.py). The model is then timed with the kernel in those places
-- against the original by a benchmark job with the field in_model (agents/lib/in_model.lua): the
-- evaluator's timing and trust rules, so the in-model figure is a verified figure with its spread.
-- The in-model speedup and each replaced submodule's standalone speedup go to summary.json and
-- report.html: a kernel faster alone and slower in the model is reported so.
local fs = require("kagent.fs")
local json = require("kagent.json")
local ktime = require("kagent.time")
local run_lib = require("agents.run")
local in_model = require("agents.lib.in_model")
local shrink_lib = require("agents.run.shrink")

local PROG = "agents/integrate.lua"
local SPEC = {
  kernel = { type = "string", help = "the kernel file (ModelNew or kernel_function), verified on --kernel-problem" },
  ["kernel-problem"] = { type = "string", help = "the problem the kernel was written for (how it is built)" },
  model = { type = "string", help = "the model: a KernelBench problem file (Model, get_inputs, get_init_inputs), e.g. a Level 3 problem" },
  class = { type = "string", help = "replace every submodule of this class name that the kernel computes" },
  path = { type = "string", help = "replace the submodule at this dotted path (e.g. layers.0.input_layernorm)" },
  adapter = { type = "string", help = "a Python file whose adapt(kernel, target) returns what replaces each target, for a "
    .. "kernel written for another layout or signature (examples/adapters/); its glue is timed with the kernel" },
  dtype = { type = "string", choices = { "fp32", "bf16", "fp16" }, default = "fp32", help = "dtype of the model and its inputs" },
  devices = { type = "string", help = "\"cpu\" or a GPU (\"0\"); default: the first GPU here, else cpu" },
  shrink = { type = "boolean", default = false, help = "run the model at small sizes (its batch and extents lowered) where it runs there" },
  reps = { type = "integer", min = 3, default = 20, help = "timed calls of each replaced submodule's rough standalone figure (median); the model's figure is the evaluator's adaptive timing" },
  out = { type = "string", default = "runs", help = "folder for the run folder integrate_<UTC time>" },
  ["job-timeout"] = { type = "number", above = 0, default = 900, help = "seconds the evaluator job may take" },
}
local HOW = { usage = "kagent-rt agents/integrate.lua --kernel K --kernel-problem P --model M.py (--class NAME | --path a.b) [--adapter A.py]",
  about = "A verified kernel inside a whole model: matching submodules replaced, the model's output verified, "
    .. "the model timed before and after; the in-model speedup beside the standalone one.",
  epilog = "Exit status: 0 the integrated model verified, 1 it did not (or no submodule matched), 2 bad input (a file "
    .. "named that fails on its own included).",
  llm_free = true }

local function esc(s) return (tostring(s):gsub("&", "&amp;"):gsub("<", "&lt;"):gsub(">", "&gt;")) end
local function f(v, fmt) return type(v) == "number" and string.format(fmt or "%.4f", v) or "-" end

local function html(s)
  local rows = {}
  for _, t in ipairs(s.targets or {}) do
    rows[#rows + 1] = string.format("<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>",
      esc(t.path), esc(t.class), t.matched and "replaced" or esc("left: " .. tostring(t.reason)), f(t.standalone_ref_ms),
      f(t.standalone_kernel_ms), f(t.standalone_speedup, "%.2fx"))
  end
  local verdict = s.verified and string.format("verified; in the model %.2fx (%s ms → %s ms, spread %s), standalone %sx",
    s.in_model_speedup, f(s.model_ms_before), f(s.model_ms_after), f(s.in_model.spread, "%.2f"), f(s.standalone_speedup, "%.2f"))
    or ("not verified: " .. tostring(s.reason or s.error))
  return table.concat({ "<!doctype html><html><head><meta charset=\"utf-8\"><title>integrate: ", esc(fs.basename(s.model)),
    "</title><style>body{font-family:sans-serif;margin:2em}td,th{padding:4px 10px;border-bottom:1px solid #ddd}</style></head><body>",
    "<h1>Kernel in the model</h1><p>kernel <code>", esc(s.kernel), "</code> (written for <code>", esc(s.kernel_problem),
    "</code>) in <code>", esc(s.model), "</code>, matching ", esc(s.match),
    type(s.adapter) == "string" and (", through the adapter <code>" .. esc(s.adapter) .. "</code>") or "",
    ", ", esc(s.dtype), " on ", esc(s.device), "</p>",
    "<p><b>", esc(verdict), "</b></p>",
    s.standalone_faster_model_slower and "<p><b>Faster standalone, slower in the model.</b></p>" or "",
    "<table><tr><th>submodule</th><th>class</th><th>outcome</th><th>standalone ref ms</th><th>kernel ms</th><th>standalone speedup</th></tr>",
    table.concat(rows, "\n"), "</table></body></html>\n" })
end

local function main(argv)
  local opts, _, code = run_lib.parse(PROG, argv, SPEC, HOW)
  if not opts then return code end
  for _, k in ipairs({ "kernel", "kernel_problem", "model", "adapter" }) do
    if (k ~= "adapter" or opts[k] ~= nil) and not (opts[k] and fs.exists(opts[k])) then
      io.stderr:write(string.format("%s: --%s must name a file\n", PROG, k:gsub("_", "-")))
      return 2
    end
  end
  if (opts.class == nil) == (opts.path == nil) then  -- both, or neither
    io.stderr:write(PROG .. ": give one of --class and --path\n")
    return 2
  end
  local devices, derr, dcode = run_lib.pool_devices(PROG, opts)
  if derr then return dcode end
  local _, oerr, ocode = run_lib.out_dir(PROG, opts.out)
  if oerr then return ocode end
  local pool = require("kagent.gpu").pool({ devices = devices, timeout = opts.job_timeout + 60 })
  local devs = pool:devices() or {}
  local t0 = ktime.now()
  local a = pool:analyze({ kind = "integrate", problem = opts.model, kernel = opts.kernel, kernel_problem = opts.kernel_problem,
    match_class = opts.class, match_path = opts.path, adapter = opts.adapter, dtype = opts.dtype, shrink = opts.shrink or nil, reps = opts.reps,
    timeout = opts.job_timeout })
  -- the model's figure: a benchmark job of the model with the kernel in the places matched above
  local timed, problem_file
  if a.ok and a.verified == true then
    problem_file = opts.model
    if type(a.shrunk) == "table" and next(a.shrunk) ~= nil then  -- the sizes the analysis ran at
      problem_file = fs.abspath(fs.join(opts.out, string.format("integrate_model_shrunk_%04x.py", math.random(0, 0xffff))))
      local ok, werr = fs.mkdir_p(opts.out)
      if ok then ok, werr = fs.write(problem_file, shrink_lib.source(assert(fs.read(opts.model)), a.shrunk)) end
      if not ok then
        pool:close()
        io.stderr:write(string.format("%s: the model's smaller copy could not be written to %s: %s\n", PROG, problem_file, tostring(werr)))
        return 1
      end
    end
    timed = pool:benchmark(in_model.job({ model = problem_file, kernel = opts.kernel, kernel_problem = opts.kernel_problem,
      paths = a.replaced, adapter = opts.adapter, dtype = opts.dtype, timeout = opts.job_timeout }))
    if problem_file ~= opts.model then os.remove(problem_file) end
  end
  pool:close()
  local fig = timed and in_model.figure(timed) or {}
  local d1 = devs[1] or {}
  local s = { mode = "integrate", kernel = fs.abspath(opts.kernel), kernel_problem = fs.abspath(opts.kernel_problem),
    model = fs.abspath(opts.model), adapter = opts.adapter and fs.abspath(opts.adapter) or json.null, match = opts.class and ("class " .. opts.class) or ("path " .. opts.path),
    dtype = opts.dtype, device = d1.mode == "cpu" and "cpu" or (d1.gpu_name or "?"), torch = d1.torch,
    verified = a.ok and a.verified == true and fig.ok == true, targets = a.targets or json.empty_array,
    replaced = a.replaced or json.empty_array,
    model_ms_before = fig.model_ms_before or json.null, model_ms_after = fig.model_ms_after or json.null,
    in_model_speedup = fig.speedup or json.null, in_model = timed and fig or json.null,
    standalone_speedup = a.standalone_speedup or json.null,
    standalone_faster_model_slower = type(a.standalone_speedup) == "number" and a.standalone_speedup > 1.0
      and type(fig.speedup) == "number" and fig.speedup < 1.0,
    max_abs_diff = a.max_abs_diff or json.null, judged_by_fp32 = a.judged_by_fp32 or json.null,
    shrunk = a.shrunk or json.null,
    reason = a.reason or (timed and not fig.ok and ("the in-model timing refused it: " .. tostring(fig.error))) or json.null,
    error = (not a.ok) and tostring(a.error) or json.null,
    wall_s = ktime.now() - t0, created = os.date("!%Y-%m-%dT%H:%M:%SZ") }
  local dir = fs.join(opts.out, "integrate_" .. os.date("!%Y%m%d-%H%M%S") .. string.format("_%04x", math.random(0, 0xffff)))
  local wrote, werr = fs.mkdir_p(dir)
  if wrote then wrote, werr = fs.write(fs.join(dir, "summary.json"), json.encode(s, { pretty = true }) .. "\n") end
  if wrote then wrote, werr = fs.write(fs.join(dir, "report.html"), html(s)) end
  if not wrote then
    io.stderr:write(string.format("%s: the results could not be written to %s: %s\n", PROG, dir, tostring(werr)))
    return 1
  end
  if s.verified then
    print(string.format("integrated: %d submodule(s) replaced%s; the model %.4f ms -> %.4f ms (p10-p90 %s-%s ms): %.2fx in the model, %sx standalone%s\n  %s",
      #s.replaced, opts.adapter and " through the adapter" or "", s.model_ms_before, s.model_ms_after, f(fig.p10), f(fig.p90),
      s.in_model_speedup, f(s.standalone_speedup, "%.2f"),
      s.standalone_faster_model_slower and " (faster standalone, slower in the model)" or "", dir))
    return 0
  end
  print(string.format("not integrated: %s\n  %s", tostring(s.reason ~= json.null and s.reason or a.error), dir))
  -- loading the files named and drawing the model's inputs run only their own code: bad input
  if not a.ok and a.stage == "load" and tostring(a.error):match("^ERUN") then
    io.stderr:write(string.format("%s: the model, the kernel or its problem fails on its own (stage load: %s)\n",
      PROG, tostring(a.error)))
    return 2
  end
  return 1
end

return main(kagent.args)
