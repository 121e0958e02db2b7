-- The figures of a sweep of agents/fuse.lua (policy fuse, Levels 2 and 3): per problem the route,
-- the subgraphs, whether the decomposition was valid (or why not), whether the LLM-free first
-- program verified (or at which stage and why), its time against eager, torch.compile and
-- max-autotune, the share of GPU time in the program's own kernels, and the run's wall time; over
-- the sweep, the fractions decomposed and verified and the first programs' geomeans and fast_p.
-- docs/sweeps.md defines them. Pure functions: no files, no processes.
local json = require("kagent.json")
local keys_lib = require("agents.lib.keys")
local stats = require("agents.lib.stats")
local baselines = require("agents.lib.baselines")
local text_section = require("agents.lib.text_section")

local M = {}

local function num(v) return type(v) == "number" and v or nil end

M.DEFINITIONS = {
  decomposed = "problems whose decomposition was accepted against the traced graph (summary.subgraphs present)",
  first_verified = "problems whose LLM-free first program verified against the model and passed the composer's audit (summary.first_program.verified)",
  first_speedup = "eager (compile, max-autotune) median / first program median, from the one evaluator job that timed them side by side",
  first_fast_p = "first_fast_p vs X = (problems whose first program verified AND is faster than X by more than p) / problems",
  own_time_frac = "share of the program's GPU kernel time in its own kernels (the kernel audit; the rest is library kernels: cuBLAS, cuDNN, ATen); none in CPU mode",
}

-- row(summary) -> the fuse fields of one problem's row (nil when the summary is not a fuse run's)
function M.row(s)
  if type(s) ~= "table" or s.mode ~= "fuse" then return nil end
  local r = { route = s.route and s.route.final ~= json.null and s.route.final or (s.route and s.route.path) or nil }
  local sg = type(s.subgraphs) == "table" and s.subgraphs or nil
  r.subgraphs, r.distinct = sg and num(sg.count), sg and num(sg.distinct)
  local d = type(s.decomposition) == "table" and s.decomposition or {}
  r.decomposed_by = d.by
  if sg then r.decomposition = "valid"
  else
    local st = type(s.stages) == "table" and s.stages.decompose
    r.decomposition = "no: " .. tostring(st and st.error or d.reason or (s.route and s.route.static
      and s.route.static.reasons and s.route.static.reasons[1]) or s.error or "not decomposed")
  end
  local fp = type(s.first_program) == "table" and s.first_program or nil
  if fp then
    r.first_verified = fp.verified == true
    r.first_stage, r.first_reason = fp.stage ~= json.null and fp.stage or nil, fp.reason ~= json.null and fp.reason or nil
    r.first_ms = num(fp.time_ms)
    -- every baseline its job timed (the record lists those it could not time as null), and of
    -- those the ones the run's evaluator reports (its summary's: the ready line's)
    r.baselines, r.reported = baselines.listed(fp, "time_ms"), baselines.listed(s.baselines)
    r.first_speedup = {}
    for _, b in ipairs(r.baselines) do
      local ms = num(fp[b .. "_ms"])
      r[b .. "_ms"], r.first_speedup[b] = ms, r.first_ms and ms and ms / r.first_ms
    end
    r.own_time_frac = num(fp.own_time_frac)
    r.baseline_errors = type(fp.baseline_errors) == "table" and fp.baseline_errors or nil
    local sources, passed, untimed = {}, {}, {}
    for _, k in ipairs(type(fp.kernels) == "table" and fp.kernels or {}) do
      if k.source and k.source ~= json.null then sources[k.source] = true end
      if type(k.passed_over) == "string" then passed[#passed + 1] = k.dir .. ": " .. k.passed_over end
      if type(k.untimed) == "string" then untimed[#untimed + 1] = k.dir .. ": " .. k.untimed end
    end
    r.first_sources = table.concat(keys_lib.sorted(sources), "+")
    -- the floor's candidate kept (agents/flows/floor.lua): a whole-problem program names its kernel
    r.floor_source = type(fp.source) == "string" and fp.source or nil
    for _, c in ipairs(type(fp.candidates) == "table" and fp.candidates or {}) do
      if c.source == r.floor_source and c.source ~= "split" and type(c.kernel) == "string" then r.first_sources = c.kernel end
    end
    r.first_passed_over = #passed > 0 and table.concat(passed, "; ") or nil
    r.first_untimed = #untimed > 0 and untimed or nil
  else
    r.first_verified, r.first_speedup = false, {}
  end
  r.wall_s = num(s.wall_s)
  return r
end

-- names(rows, field) -> the baselines the rows' first programs list: field "baselines" every one
-- their jobs timed, "reported" those the runs' evaluators report; in baselines.saved's order
function M.names(rows, field)
  local listed = {}
  for _, row in ipairs(rows) do
    for _, b in ipairs(row.fuse and row.fuse[field] or {}) do listed[b .. "_ms"] = json.null end
  end
  return baselines.listed(listed)
end

-- aggregate(rows) -> {problems, decomposed, first_verified, first_speedup = {<baseline timed> =
-- {n, geomean}}, first_fast_p = {<baseline reported> = {["1.0"], ["1.2"]}}, floor_sources =
-- {[split|whole|max-autotune] = verified programs it gave}} over the
-- sweep's rows (figures.row's, whose .fuse this module filled)
function M.aggregate(rows)
  local n, dec, ver, floors = #rows, 0, 0, {}
  local sp, fast = {}, {}
  for _, b in ipairs(M.names(rows, "baselines")) do sp[b] = {} end
  for _, b in ipairs(M.names(rows, "reported")) do fast[b] = { ["1.0"] = 0, ["1.2"] = 0 } end
  for _, row in ipairs(rows) do
    local f = row.fuse
    if f then
      if f.decomposition == "valid" then dec = dec + 1 end
      if f.first_verified then
        ver = ver + 1
        if f.floor_source then floors[f.floor_source] = (floors[f.floor_source] or 0) + 1 end
        for b, list in pairs(sp) do
          local x = f.first_speedup[b]
          if x and x > 0 then list[#list + 1] = x end
        end
        for b, t in pairs(fast) do
          local x = f.first_speedup[b]
          for k in pairs(t) do if x and x > tonumber(k) then t[k] = t[k] + 1 end end
        end
      end
    end
  end
  local out = { problems = n, decomposed = dec, first_verified = ver, first_speedup = {}, first_fast_p = {},
    floor_sources = next(floors) and floors or json.null }
  for b, list in pairs(sp) do out.first_speedup[b] = { n = #list, geomean = stats.geomean(list) or json.null } end
  for b, t in pairs(fast) do
    out.first_fast_p[b] = {}
    for k, c in pairs(t) do out.first_fast_p[b][k] = (sp[b] and #sp[b] > 0 and n > 0) and c / n or json.null end
  end
  return out
end

local function f(v, fmt) return type(v) == "number" and string.format(fmt, v) or "-" end
local function cell(s) return (tostring(s):gsub("|", "\\|"):gsub("\n", " ")) end
-- label(b) -> a baseline's name in the table: compile_max_autotune as max-autotune
local function label(b) return (b:gsub("^compile_", ""):gsub("_", "-")) end

-- table_text(rows, fagg) -> the fuse table (Markdown) and its aggregate lines
function M.table_text(rows, fagg)
  -- a "<baseline> ms" column for each reported baseline, an "x <baseline>" for each timed one
  local timed, reported = M.names(rows, "baselines"), M.names(rows, "reported")
  local head = { "problem", "route", "subgraphs", "decomposition", "first program", "first ms" }
  for _, b in ipairs(reported) do head[#head + 1] = label(b) .. " ms" end
  for _, b in ipairs(timed) do head[#head + 1] = "x " .. label(b) end
  head[#head + 1], head[#head + 2] = "own time", "wall s"
  local out = { "| " .. table.concat(head, " | ") .. " |", "|" .. string.rep("---|", #head) }
  for _, r in ipairs(rows) do
    local x = r.fuse or { first_speedup = {} }
    local first = x.first_verified and ("verified (" .. (x.floor_source and (x.floor_source .. ": ") or "")
      .. tostring(x.first_sources or "?")
      .. (x.first_untimed and string.format("; %d kernel(s) untimed", #x.first_untimed) or "") .. ")")
      or (x.first_stage and (x.first_stage .. ": " .. tostring(x.first_reason)) or (r.status ~= "done" and ("run " .. r.status .. (r.error and (": " .. r.error) or "")) or "no"))
    local cells = { r.name, tostring(x.route or "-"),
      x.subgraphs and string.format("%d (%d distinct)", x.subgraphs, x.distinct or x.subgraphs) or "-",
      cell(tostring(x.decomposition or "-"):sub(1, 160)), cell(first:sub(1, 200)), f(x.first_ms, "%.4f") }
    for _, b in ipairs(reported) do cells[#cells + 1] = f(x[b .. "_ms"], "%.4f") end
    for _, b in ipairs(timed) do cells[#cells + 1] = f(x.first_speedup[b], "%.2f") end
    cells[#cells + 1], cells[#cells + 2] = f(x.own_time_frac, "%.2f"), f(x.wall_s, "%.0f")
    out[#out + 1] = "| " .. table.concat(cells, " | ") .. " |"
  end
  local function g(b)
    local s = fagg.first_speedup[b]
    return s and s.n > 0 and string.format("geomean %.3f (n=%d)", s.geomean, s.n) or "not measured"
  end
  local function fp(b)
    local t = fagg.first_fast_p[b]
    if t["1.0"] == json.null then return "not measured" end
    return string.format("fast_1.0 %.0f%%, fast_1.2 %.0f%%", 100 * t["1.0"], 100 * t["1.2"])
  end
  out[#out + 1] = ""
  out[#out + 1] = string.format("decomposed %d/%d; first programs verified %d/%d", fagg.decomposed, fagg.problems,
    fagg.first_verified, fagg.problems)
  local xs = {}
  for _, b in ipairs(timed) do
    xs[#xs + 1] = "x " .. label(b) .. ": " .. g(b) .. (fagg.first_fast_p[b] and (", " .. fp(b)) or "")
  end
  out[#out + 1] = "first program " .. table.concat(xs, "; ")
  local kept = {}
  for _, src in ipairs(keys_lib.sorted(type(fagg.floor_sources) == "table" and fagg.floor_sources or {})) do kept[#kept + 1] = string.format("%s %d", src, fagg.floor_sources[src]) end
  if #kept > 0 then out[#out + 1] = "floor programs kept: " .. table.concat(kept, ", ") end
  -- a verified program whose baseline has no figure: the reason, or that none was recorded
  local missing = {}
  for _, r in ipairs(rows) do
    local x = r.fuse
    if x and x.first_verified then
      for _, b in ipairs(reported) do
        if not x[b .. "_ms"] then
          local why = x.baseline_errors and x.baseline_errors[b]
          missing[#missing + 1] = string.format("- %s: %s: %s", r.name, b,
            cell(tostring(why or "no figure and no reason recorded"):sub(1, 300)))
        end
      end
    end
  end
  text_section.append(out, "baselines not measured for verified programs (their ratios are left out of the geomeans):",
    missing)
  return table.concat(out, "\n")
end

return M
