-- agents/bench.lua's outputs: the tables (plain columns aligned on a terminal, Markdown with
-- --markdown or into a pipe; KernelAgent's benchmark.py columns first: eager, torch.compile, input,
-- optimized), the --json rows (benchmark.py --json's keys, then ours) and --csv (one flat line
-- per problem). The baselines' columns are those of the evaluator's ready line (`baselines`, which
-- agents/bench.lua passes as `names`), after KernelAgent's own two.
local json = require("kagent.json")
local keys_lib = require("agents.lib.keys")
local calls = require("agents.run.calls")
local text_section = require("agents.lib.text_section")
local own_share = require("agents.lib.own_share")

local M = {}
local unpack = unpack or table.unpack

-- The keys of KernelAgent's benchmark.py --json, in its order; a figure not measured is null.
-- An outside format: its baselines are KernelAgent's, whatever the evaluator times.
M.KA_KEYS = { "problem", "eager_ms", "compile_ms", "input_kernel_ms", "optimized_ms" }

-- figures(names) -> the timed figures in column order: KernelAgent's (its baselines among
-- `names`, the input, the optimized kernel), then the other baselines of `names` in their order
function M.figures(names)
  local out, ka = {}, {}
  for _, k in ipairs(M.KA_KEYS) do
    local b = k:match("^(.+)_ms$")
    if b and b ~= "input_kernel" and b ~= "optimized" then ka[b] = true end
  end
  for _, b in ipairs(names) do if ka[b] then out[#out + 1] = b end end
  out[#out + 1], out[#out + 2] = "input_kernel", "optimized"
  for _, b in ipairs(names) do if not ka[b] then out[#out + 1] = b end end
  return out
end

-- baselines_of(names) -> `names` in column order (the figures less the two kernels)
local function baselines_of(names)
  local out = {}
  for _, k in ipairs(M.figures(names)) do
    if k ~= "input_kernel" and k ~= "optimized" then out[#out + 1] = k end
  end
  return out
end

-- label(figure) -> its column's name: "input", "max-autotune" for compile_max_autotune
local function label(k)
  if k == "input_kernel" then return "input" end
  return (k:gsub("^compile_", ""):gsub("_", "-"))
end

local function f(v, p) return type(v) == "number" and string.format(p or "%.4f", v) or "-" end
local function x(v) return type(v) == "number" and string.format("%.2fx", v) or "-" end

local function range(s)
  if type(s) ~= "table" or not s.p10 then return "-" end
  return string.format("%.4f-%.4f", s.p10, s.p90)
end

-- json_rows(rows, names) -> rows ready for --json: every benchmark.py key and every baseline of
-- `names` present (null when unmeasured)
function M.json_rows(rows, names)
  local out = {}
  for i, r in ipairs(rows) do
    local o = {}
    for k, v in pairs(r) do o[k] = v end
    for _, k in ipairs(M.KA_KEYS) do if o[k] == nil then o[k] = json.null end end
    for _, b in ipairs(names) do if o[b .. "_ms"] == nil then o[b .. "_ms"] = json.null end end
    out[i] = o
  end
  return out
end

-- grid(header, rows, markdown) -> the lines of one table: Markdown (pipes, a separator line) or
-- plain columns for a terminal; either way each column is padded to its widest cell.
local function grid(header, rows, markdown)
  local width = {}
  for _, r in ipairs({ header, unpack(rows) }) do
    for i, c in ipairs(r) do width[i] = math.max(width[i] or 0, #c) end
  end
  local function line(r)
    local cells = {}
    for i, c in ipairs(r) do cells[i] = c .. string.rep(" ", width[i] - #c) end
    if markdown then return "| " .. table.concat(cells, " | ") .. " |" end
    return (table.concat(cells, "  "):gsub("%s+$", ""))
  end
  local rule = {}
  for i in ipairs(header) do rule[i] = string.rep("-", width[i] + (markdown and 2 or 0)) end
  local out = { line(header), markdown and ("|" .. table.concat(rule, "|") .. "|") or table.concat(rule, "  ") }
  for _, r in ipairs(rows) do out[#out + 1] = line(r) end
  return out
end

local TRITON_ON_CPU = require("agents.tools.bench.measure").TRITON_ON_CPU

-- notes(rows) -> the lines under the tables: what was not measured or failed (or was timed by the
-- hardened re-measure, measure.HARDENED_NOTE), each message once
-- with the problems and figures it applies to
local function notes(rows)
  local order, by = {}, {}
  local function add(problem, key, msg)
    msg = tostring(msg):sub(1, 300)
    if not by[msg] then by[msg] = { problems = {}, keys = {}, seen = {} }; order[#order + 1] = msg end
    local g = by[msg]
    if not g.seen[problem] then g.seen[problem] = true; g.problems[#g.problems + 1] = problem end
    if not g.seen["key:" .. key] then g.seen["key:" .. key] = true; g.keys[#g.keys + 1] = key end
  end
  for _, r in ipairs(rows) do
    for _, k in ipairs(keys_lib.sorted(r.errors)) do add(r.problem, k, r.errors[k]) end
    if r.interleaved and r.interleaved.error then add(r.problem, "interleaved", r.interleaved.error) end
    if r.correct.optimized and r.shapes then add(r.problem, "optimized", r.shapes) end
    for _, k in ipairs(keys_lib.sorted(r.hardened or {})) do add(r.problem, k, r.hardened[k]) end
  end
  local out = {}
  for _, msg in ipairs(order) do
    local g = by[msg]
    local who = #g.problems == #rows and #rows > 1 and string.format("every problem (%d)", #rows)
      or table.concat(g.problems, ", ")
    out[#out + 1] = string.format("- %s, %s: %s", who, table.concat(g.keys, " and "), msg)
  end
  return out
end

-- short_shapes(label) -> a "only at the problem's shapes" label without the evaluator's reason,
-- which the notes under the tables give whole
local function short_shapes(label) return (label:gsub(" %(.*$", "")) end

-- all_triton_on_cpu(rows) -> true when no kernel of any row could run: Triton kernels in CPU mode
local function all_triton_on_cpu(rows)
  if #rows == 0 then return false end
  for _, r in ipairs(rows) do
    local function triton(k) return tostring(r.errors[k] or ""):find(TRITON_ON_CPU, 1, true) ~= nil end
    if not (triton("optimized") or triton("input_kernel")) then return false end
    if r.optimized_ms or r.input_kernel_ms then return false end
  end
  return true
end

-- table_text(rows, meta) -> the tables printed at the end. meta: device, dtype, markdown (Markdown
-- tables; else plain columns aligned for a terminal), baselines (the evaluator's names).
function M.table_text(rows, meta)
  local out = {
    string.format("dtype %s on %s; medians in ms, all timed by the evaluator's one method%s", meta.dtype or "?",
      meta.device or "?", meta.device == "cpu" and " (CPU mode: wall clock)" or " (L2 flush, launch pad, CUDA events, device-wide sync)"),
    "",
  }
  if all_triton_on_cpu(rows) then
    -- nothing ran: one line says why instead of a table of dashes and a note per figure
    out[#out + 1] = string.format("Triton kernels need a GPU: the kernels of the %d problem(s) are Triton, which CPU "
      .. "mode cannot run, so nothing was measured (the baselines are timed beside a verified kernel). Run on a GPU machine.",
      #rows)
    return table.concat(out, "\n")
  end
  local md = meta.markdown
  local figs, bases = M.figures(meta.baselines), baselines_of(meta.baselines)
  local head, main = { "problem" }, {}
  for _, k in ipairs(figs) do head[#head + 1] = label(k) end
  for _, b in ipairs(bases) do head[#head + 1] = "opt vs " .. label(b) end
  -- own: the optimized kernel's own share of its GPU time (agents/lib/own_share.lua)
  for _, h in ipairs({ "opt vs input (interleaved)", "SOL % input → opt", "correct input, opt", "own" }) do head[#head + 1] = h end
  for _, r in ipairs(rows) do
    local il = r.interleaved and r.interleaved.optimized_vs_input
      and string.format("%.2fx (%.2f-%.2f)", r.interleaved.optimized_vs_input, r.interleaved.p10 or 0, r.interleaved.p90 or 0)
      or x(r.speedup.optimized_vs_input)
    local function yn(k) return r.correct[k] == nil and "-" or (r.correct[k] and "yes" or "NO") end
    local shapes = r.correct.optimized and r.shapes and (" (" .. short_shapes(r.shapes) .. ")") or ""
    local cells = { r.problem }
    for _, k in ipairs(figs) do cells[#cells + 1] = f(r[k .. "_ms"]) end
    for _, b in ipairs(bases) do cells[#cells + 1] = x(r.speedup["optimized_vs_" .. b]) end
    cells[#cells + 1] = il
    cells[#cells + 1] = f(r.sol_pct.input_kernel, "%.0f") .. " → " .. f(r.sol_pct.optimized, "%.0f")
    cells[#cells + 1] = yn("input_kernel") .. ", " .. yn("optimized") .. shapes
    cells[#cells + 1] = own_share.cell(r)
    main[#main + 1] = cells
  end
  for _, l in ipairs(grid(head, main, md)) do out[#out + 1] = l end
  out[#out + 1] = ""
  local spread_head, spreads = { "problem" }, {}
  for _, k in ipairs(figs) do spread_head[#spread_head + 1] = label(k) .. " p10-p90" end
  for _, b in ipairs(bases) do spread_head[#spread_head + 1] = "do_bench " .. label(b) end
  for _, r in ipairs(rows) do
    local cells = { r.problem }
    for _, k in ipairs(figs) do cells[#cells + 1] = range(r.spread[k]) end
    for _, b in ipairs(bases) do cells[#cells + 1] = f(r.do_bench_ms[b]) end
    spreads[#spreads + 1] = cells
  end
  for _, l in ipairs(grid(spread_head, spreads, md)) do out[#out + 1] = l end
  text_section.append(out, "Not measured, failed, timed another way, or verified only at the problem's shapes:",
    notes(rows))
  text_section.append(out, own_share.TITLE,
    own_share.notes(rows, function(r, i) return string.format("row %d (%s)", i, r.problem) end))
  return table.concat(out, "\n")
end

-- csv_columns(names) -> the --csv header for the baselines `names`
function M.csv_columns(names)
  local cols, figs, bases = { "problem", "dtype", "device" }, M.figures(names), baselines_of(names)
  local function add(c) cols[#cols + 1] = c end
  for _, k in ipairs(figs) do add(k .. "_ms") end
  for _, k in ipairs(figs) do add(k .. "_p10"); add(k .. "_p90") end
  for _, b in ipairs(bases) do add("do_bench_" .. b .. "_ms") end
  for _, b in ipairs(bases) do add("optimized_vs_" .. b) end
  for _, c in ipairs({ "optimized_vs_input", "interleaved_optimized_vs_input", "interleaved_p10", "interleaved_p90",
    "interleaved_cv", "sol_pct_input_kernel", "sol_pct_optimized", "lower_bound_ms", "correct_input_kernel",
    "correct_optimized", "own_share", "own_share_unknown", "library_kernels", "errors" }) do add(c) end
  return cols
end

-- csv_text(rows, names) -> CSV with a header line, for the baselines `names`
function M.csv_text(rows, names)
  local columns = M.csv_columns(names)
  local out = { calls.csv_line(columns) }
  for _, r in ipairs(rows) do
    local flat = { problem = r.problem, dtype = r.dtype, device = r.device, lower_bound_ms = r.lower_bound_ms }
    for _, k in ipairs(M.figures(names)) do
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
    flat.own_share, flat.own_share_unknown = r.own_share, r.own_share_unknown
    flat.library_kernels = type(r.library_kernels) == "table" and table.concat(r.library_kernels, " ") or nil
    local errs = {}
    for k, v in pairs(r.errors) do errs[#errs + 1] = k .. ": " .. tostring(v) end
    table.sort(errs)
    flat.errors = table.concat(errs, "; ")
    local values = {}
    for i, c in ipairs(columns) do values[i] = flat[c] end
    out[#out + 1] = calls.csv_line(values, #columns)
  end
  return table.concat(out)
end

return M
