-- agents/bench.lua's outputs: the tables printed at the end (aligned, or Markdown with
-- --markdown), the --json rows (benchmark.py --json's keys, then ours) and --csv (one flat line
-- per problem).
local json = require("kagent.json")
local calls = require("agents.lib.calls")
local grid = require("agents.lib.grid")

local M = {}

-- The keys of KernelAgent's benchmark.py --json, in its order; a figure not measured is null.
M.KA_KEYS = { "problem", "eager_ms", "compile_ms", "input_kernel_ms", "optimized_ms" }

local function f(v, p) return type(v) == "number" and string.format(p or "%.4f", v) or "-" end
local function x(v) return type(v) == "number" and string.format("%.2fx", v) or "-" end

local function range(s)
  if type(s) ~= "table" or not s.p10 then return "-" end
  return string.format("%.4f-%.4f", s.p10, s.p90)
end

-- json_rows(rows) -> rows ready for --json: every benchmark.py key present (null when unmeasured)
function M.json_rows(rows)
  local out = {}
  for i, r in ipairs(rows) do
    local o = {}
    for k, v in pairs(r) do o[k] = v end
    for _, k in ipairs(M.KA_KEYS) do if o[k] == nil then o[k] = json.null end end
    if o.compile_max_autotune_ms == nil then o.compile_max_autotune_ms = json.null end
    out[i] = o
  end
  return out
end

-- table_text(rows, meta) -> the tables printed at the end, aligned for a terminal or Markdown
-- (meta.markdown). meta: device, dtype. A reason shared by several figures (a Triton kernel in CPU
-- mode, say) is printed once with the problems it applies to.
function M.table_text(rows, meta)
  local md = { markdown = meta.markdown }
  local times, ratios, spreads = {}, {}, {}
  for _, r in ipairs(rows) do
    local il = r.interleaved and r.interleaved.optimized_vs_input
      and string.format("%.2fx (%.2f-%.2f)", r.interleaved.optimized_vs_input, r.interleaved.p10 or 0, r.interleaved.p90 or 0)
      or x(r.speedup.optimized_vs_input)
    local function yn(k) return r.correct[k] == nil and "-" or (r.correct[k] and "yes" or "NO") end
    times[#times + 1] = { r.problem, f(r.eager_ms), f(r.compile_ms), f(r.compile_max_autotune_ms), f(r.input_kernel_ms),
      f(r.optimized_ms), yn("input_kernel") .. ", " .. yn("optimized") }
    ratios[#ratios + 1] = { r.problem, x(r.speedup.optimized_vs_eager), x(r.speedup.optimized_vs_compile),
      x(r.speedup.optimized_vs_compile_max_autotune), il,
      f(r.sol_pct.input_kernel, "%.0f") .. " → " .. f(r.sol_pct.optimized, "%.0f") }
    local s, d = r.spread, r.do_bench_ms
    spreads[#spreads + 1] = { r.problem, range(s.eager), range(s.compile), range(s.compile_max_autotune),
      range(s.input_kernel), range(s.optimized), f(d.eager), f(d.compile), f(d.compile_max_autotune) }
  end
  local out = {
    string.format("dtype %s on %s; medians in ms, all timed by the evaluator's one method%s", meta.dtype or "?",
      meta.device or "?", meta.device == "cpu" and " (CPU mode: wall clock)" or " (L2 flush, launch pad, CUDA events, device-wide sync)"),
  }
  local measured = false
  for _, row in ipairs(times) do for i = 2, 6 do if row[i] ~= "-" then measured = true end end end
  if not measured then
    out[#out + 1] = "No figure was measured, for the reasons below."
  else
    for _, l in ipairs({ "",
    grid.render({ "problem", "eager", "compile", "max-autotune", "input", "optimized", "correct input, opt" }, times, md),
    "",
    "The optimized kernel against each:",
    grid.render({ "problem", "vs eager", "vs compile", "vs max-autotune", "vs input (interleaved)", "SOL % input → opt" },
      ratios, md),
    "",
    "Spreads (p10-p90) and do_bench means:",
    grid.render({ "problem", "eager", "compile", "max-autotune", "input", "optimized", "do_bench eager",
      "do_bench compile", "do_bench max-autotune" }, spreads, md) }) do out[#out + 1] = l end
  end
  -- each reason once, with the figures it applies to: per figure, the problems (or "every problem")
  local reasons, order = {}, {}
  local function note(text, key, problem)
    local r = reasons[text]
    if not r then r = { keys = {}, by_key = {} }; reasons[text] = r; order[#order + 1] = text end
    if not r.by_key[key] then r.by_key[key] = {}; r.keys[#r.keys + 1] = key end
    table.insert(r.by_key[key], problem)
  end
  for _, r in ipairs(rows) do
    local keys = {}
    for k in pairs(r.errors) do keys[#keys + 1] = k end
    table.sort(keys)
    for _, k in ipairs(keys) do note(tostring(r.errors[k]):sub(1, 300), k, r.problem) end
    if r.interleaved and r.interleaved.error then note(r.interleaved.error:sub(1, 300), "interleaved", r.problem) end
  end
  if #order > 0 then
    out[#out + 1] = ""
    out[#out + 1] = "Not measured or failed:"
    for _, text in ipairs(order) do
      local where = {}
      for _, k in ipairs(reasons[text].keys) do
        local ps = reasons[text].by_key[k]
        where[#where + 1] = k .. " of " .. ((#rows > 1 and #ps == #rows) and "every problem" or table.concat(ps, ", "))
      end
      out[#out + 1] = string.format("- %s: %s", table.concat(where, "; "), text)
    end
  end
  return table.concat(out, "\n")
end

M.CSV_COLUMNS = { "problem", "dtype", "device", "eager_ms", "compile_ms", "input_kernel_ms", "optimized_ms",
  "compile_max_autotune_ms", "eager_p10", "eager_p90", "compile_p10", "compile_p90", "input_kernel_p10", "input_kernel_p90",
  "optimized_p10", "optimized_p90", "compile_max_autotune_p10", "compile_max_autotune_p90", "do_bench_eager_ms",
  "do_bench_compile_ms", "do_bench_compile_max_autotune_ms", "optimized_vs_eager", "optimized_vs_compile",
  "optimized_vs_compile_max_autotune", "optimized_vs_input", "interleaved_optimized_vs_input", "interleaved_p10",
  "interleaved_p90", "interleaved_cv", "sol_pct_input_kernel", "sol_pct_optimized", "lower_bound_ms", "correct_input_kernel",
  "correct_optimized", "errors" }

-- csv_text(rows) -> CSV with a header line
function M.csv_text(rows)
  local out = { calls.csv_line(M.CSV_COLUMNS) }
  for _, r in ipairs(rows) do
    local flat = { problem = r.problem, dtype = r.dtype, device = r.device, lower_bound_ms = r.lower_bound_ms }
    for _, k in ipairs({ "eager", "compile", "input_kernel", "optimized", "compile_max_autotune" }) do
      flat[k .. "_ms"] = r[k .. "_ms"]
      local s = r.spread[k]
      if s then flat[k .. "_p10"], flat[k .. "_p90"] = s.p10, s.p90 end
    end
    for k, v in pairs(r.do_bench_ms) do flat["do_bench_" .. k .. "_ms"] = v end
    for k, v in pairs(r.speedup) do flat[k] = v end
    local il = r.interleaved or {}
    flat.interleaved_optimized_vs_input, flat.interleaved_p10, flat.interleaved_p90, flat.interleaved_cv =
      il.optimized_vs_input, il.p10, il.p90, il.cv
    flat.sol_pct_input_kernel, flat.sol_pct_optimized = r.sol_pct.input_kernel, r.sol_pct.optimized
    flat.correct_input_kernel, flat.correct_optimized = r.correct.input_kernel, r.correct.optimized
    local errs = {}
    for k, v in pairs(r.errors) do errs[#errs + 1] = k .. ": " .. tostring(v) end
    table.sort(errs)
    flat.errors = table.concat(errs, "; ")
    local values = {}
    for i, c in ipairs(M.CSV_COLUMNS) do values[i] = flat[c] end
    out[#out + 1] = calls.csv_line(values, #M.CSV_COLUMNS)
  end
  return table.concat(out)
end

return M
