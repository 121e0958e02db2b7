-- Index pages: runs/index.html (every run folder under a folder of runs: problem, policy, best
-- speedups, date; every figure the final confirmation's) and a sweep folder's index.html (its problems, figures and definitions).
local fs = require("kagent.fs")
local html = require("agents.tools.report.html")
local charts = require("agents.tools.report.charts")
local run_data = require("agents.tools.report.run_data")
local verdict = require("agents.lib.verdict")
local baselines = require("agents.lib.baselines")
local unpack = unpack or table.unpack

local M = {}

local esc = html.esc

local function num(v) return type(v) == "number" and v or nil end

local function link(href, text) return string.format('<a href="%s">%s</a>', esc(href), esc(text)) end

-- run_row(name, summary, has_report, names) -> one row of the runs table: x_<baseline> for each
-- of names, x_input
local function run_row(name, s, has_report, names)
  -- figures only from a confirmed run (a summary from before may carry search-time ones)
  local f = verdict.reportable(s) and s or {}
  local row = { name = name, run = has_report and link(name .. "/report.html", name) or esc(name),
    started = run_data.started(s.run_id or name) or "-", problem = fs.basename(tostring(s.problem or "?")),
    policy = s.policy or "-", mode = s.mode or "-", dtype = s.dtype or "-", device = s.device or "-",
    best_ms = num(f.best_ms), x_input = num(f.speedup_vs_input), verified = verdict.verdict_word(s),
    rounds = s.rounds or "-", tokens = s.tokens and s.tokens.total or 0,
    replay = s.replay and s.replay.mode ~= "off" and string.format("%s %d/%d", s.replay.mode, s.replay.hits or 0,
      s.replay.calls or 0) or "-" }
  for _, b in ipairs(names) do row["x_" .. b] = num(f["speedup_vs_" .. b]) end
  return row
end

-- speedup_columns(names) -> the "x input" column and one "x <baseline>" column per name
local function speedup_columns(names)
  local cols = { { key = "x_input", title = "x input", fmt = "%.3f" } }
  for _, b in ipairs(names) do cols[#cols + 1] = { key = "x_" .. b, title = "x " .. b, fmt = "%.3f" } end
  return cols
end

-- columns(head, middle, tail) -> the three lists of columns as one
local function columns(...)
  local out = {}
  for i = 1, select("#", ...) do
    for _, c in ipairs((select(i, ...))) do out[#out + 1] = c end
  end
  return out
end

local RUN_HEAD = { { key = "run", fmt = function(r) return r.run end }, { key = "started" }, { key = "problem" },
  { key = "policy" }, { key = "mode" }, { key = "dtype" }, { key = "device" }, { key = "best_ms", title = "best ms", fmt = "%.4f" } }
local RUN_TAIL = { { key = "verified" }, { key = "rounds" }, { key = "tokens" }, { key = "replay", title = "replay hits/calls" } }

-- runs(folder) -> rows of the run folders under folder that finished (a summary.json), newest
-- first, and the baselines their summaries name (summary.json `baselines`)
function M.runs(folder)
  local found = {}
  for _, name in ipairs(fs.list(folder) or {}) do
    local dir = fs.join(folder, name)
    local s = fs.is_dir(dir) and run_data.read_json(dir, "summary.json")
    if s then found[#found + 1] = { name = name, s = s, report = fs.exists(fs.join(dir, "report.html")) } end
  end
  local saved = {}
  for i, f in ipairs(found) do saved[i] = f.s.baselines end
  local names = baselines.saved(unpack(saved, 1, #found))
  local rows = {}
  for i, f in ipairs(found) do rows[i] = run_row(f.name, f.s, f.report, names) end
  table.sort(rows, function(a, b) return a.started .. a.name > b.started .. b.name end)
  return rows, names
end

-- speedup_points(rows, names) -> the runs table's confirmed speedups as points of one chart
-- (charts.speedups: one group of bars per run): the page shows one method, the final
-- confirmation's. Search-time convergence is each run's own report (its "Convergence" chart).
function M.run_speedup_points(rows, names)
  local pts = {}
  for _, r in ipairs(rows) do
    for _, b in ipairs(names) do
      if num(r["x_" .. b]) then pts[#pts + 1] = { problem = r.name, baseline = b, speedup = r["x_" .. b] } end
    end
    if num(r.x_input) then pts[#pts + 1] = { problem = r.name, baseline = "input", speedup = r.x_input } end
  end
  return pts
end

-- The runs table: a click on a header sorts by that column (numbers as numbers, "-" last; a second
-- click reverses), the box filters rows by any text in them.
local SORT_FILTER = [[
(function(){
  var t=document.getElementById('runs'); if(!t) return;
  var body=t.tBodies[0], dir={};
  function key(td){var s=td.textContent.trim(),n=parseFloat(s);return s==='-'||s===''?null:(isNaN(n)||!/^[-0-9.]/.test(s)?s:n);}
  t.querySelectorAll('th').forEach(function(th,i){th.style.cursor='pointer';th.addEventListener('click',function(){
    dir[i]=dir[i]===1?-1:1;var rows=Array.prototype.slice.call(body.rows);
    rows.sort(function(a,b){var x=key(a.cells[i]),y=key(b.cells[i]);if(x===y)return 0;if(x===null)return 1;if(y===null)return -1;
      return (x<y?-1:1)*dir[i];});
    rows.forEach(function(r){body.appendChild(r);});t.setAttribute('data-sorted',th.textContent+(dir[i]>0?' up':' down'));});});
  var f=document.getElementById('filter');
  f.addEventListener('input',function(){var q=f.value.toLowerCase(),n=0;
    Array.prototype.forEach.call(body.rows,function(r){var hit=r.textContent.toLowerCase().indexOf(q)>=0;r.style.display=hit?'':'none';if(hit)n++;});
    t.setAttribute('data-shown',String(n));});
})();
]]

-- write_runs(folder) -> path of folder/index.html
function M.write_runs(folder)
  local rows, names = M.runs(folder)
  local body = { '<p class="note">A click on a column header sorts by it; the box keeps the rows that contain its text.</p>'
    .. '<input id="filter" type="search" placeholder="filter runs (problem, policy, model, ...)" size="40">' }
  body[#body + 1] = #rows > 0 and html.table_html(columns(RUN_HEAD, speedup_columns(names), RUN_TAIL), rows, { id = "runs" })
    or '<p class="note">No finished run in this folder yet.</p>'
  local pts = M.run_speedup_points(rows, names)
  if #pts > 0 then
    body[#body + 1] = "<h2>Confirmed speedups of every run</h2>"
      .. '<p class="note">The table\'s figures: each confirmed best over its baselines and its input, all '
      .. "from the run's final confirmation (one method; each run's report shows its search-time convergence).</p>"
      .. html.chart("spec-speedups", charts.speedups(pts, "speedup of each run's confirmed best"))
  end
  local path = fs.join(folder, "index.html")
  local ok, err = fs.write(path, html.page({ title = "kagent-rt runs", body = table.concat(body, "\n"), charts = #pts > 0,
    script = SORT_FILTER, subtitle = string.format("%d finished run(s) in %s", #rows, esc(fs.abspath(folder))) }))
  if not ok then return nil, err end
  return path
end

-- relative(path, base) -> path relative to base when it lies under it
local function relative(path, base)
  local p, b = fs.abspath(path), fs.abspath(base)
  if p:sub(1, #b + 1) == b .. "/" then return p:sub(#b + 2) end
  return p
end

local PROBLEM_HEAD = { { key = "name_html", title = "problem", fmt = function(r) return r.name_html end },
  { key = "status" }, { key = "correct" }, { key = "input_ms", title = "input ms", fmt = "%.4f" },
  { key = "best_ms", title = "best ms", fmt = "%.4f" } }
local PROBLEM_TAIL = { { key = "rounds" }, { key = "attempts_to_best", title = "attempts to best" }, { key = "tokens" },
  { key = "problem_time", title = "time" } }

-- problem_columns(names) -> the sweep's table: a "<baseline> ms" column per name, then the speedups
local function problem_columns(names)
  local ms = {}
  for _, b in ipairs(names) do ms[#ms + 1] = { key = b .. "_ms", title = b .. " ms", fmt = "%.4f" } end
  local sp = speedup_columns(names)
  local input = table.remove(sp, 1)
  sp[#sp + 1] = input  -- x input after the baselines', as the figures list them
  return columns(PROBLEM_HEAD, ms, sp, PROBLEM_TAIL)
end

-- sweep_baselines(plan) -> the baselines a sweep's saved record names: its rows' speedups and its
-- aggregate's fast_p
function M.sweep_baselines(plan)
  local saved = {}
  for i, r in ipairs(plan.results or {}) do saved[i] = r.speedup end
  saved[#saved + 1] = (plan.aggregate or {}).fast_p
  return baselines.saved(unpack(saved, 1, #saved))
end

-- problem_rows(dir, results, names) -> the sweep's rows for the table, with links to each run's report
function M.problem_rows(dir, results, names)
  local rows = {}
  for i, r in ipairs(results or {}) do
    local rd = type(r.run_dir) == "string" and r.run_dir or nil
    local has = rd and fs.exists(fs.join(rd, "report.html"))
    local sp = type(r.speedup) == "table" and r.speedup or {}
    rows[i] = { name_html = has and link(relative(fs.join(rd, "report.html"), dir), r.name) or esc(r.name),
      status = r.status, correct = r.correct, input_ms = num(r.input_ms), best_ms = num(r.best_ms),
      x_input = num(sp.input), rounds = r.rounds or "-", attempts_to_best = r.attempts_to_best or "-",
      tokens = r.tokens or 0, problem_time = html.hms(r.problem_s) }
    for _, b in ipairs(names) do rows[i][b .. "_ms"], rows[i]["x_" .. b] = num(r[b .. "_ms"]), num(sp[b]) end
  end
  return rows
end

-- aggregate_rows(agg, names) -> {figure, value} rows of a sweep's aggregate, in the words of figures.lua
function M.aggregate_rows(agg, names)
  local rows = {}
  local function add(k, v) rows[#rows + 1] = { figure = k, value = v } end
  local function pct(v) return type(v) == "number" and string.format("%.0f%%", 100 * v) or "not measured" end
  add("correct", string.format("%d of %d (%s)", agg.correct or 0, agg.problems or 0, pct(agg.correctness_rate)))
  for _, b in ipairs(names) do
    local f = agg.fast_p and agg.fast_p[b] or {}
    add("fast_1.0 / fast_1.2 vs " .. b, pct(f["1.0"]) .. " / " .. pct(f["1.2"]))
  end
  for _, b in ipairs(columns(names, { "input" })) do
    local s = agg.speedup and agg.speedup[b]
    if s and (s.n or 0) > 0 then
      add("speedup vs " .. b, string.format("geomean %.3f, mean %.3f (min %.3f, median %.3f, max %.3f; n=%d)",
        s.geomean, s.mean, s.min, s.median, s.max, s.n))
    else
      add("speedup vs " .. b, "no correct problem with this baseline")
    end
  end
  if agg.attempts_to_best then
    local a = agg.attempts_to_best
    add("attempts to reach the best", (a.n or 0) > 0 and string.format("median %s, mean %.1f (n=%d)",
      tostring(a.median), a.mean, a.n) or "-")
  end
  add("tokens, cost", string.format("%d, $%.4f", agg.tokens or 0, agg.cost_usd or 0))
  add("sweep wall, problem time", html.hms(agg.wall_s) .. ", " .. html.hms(agg.problem_s))
  return rows
end

-- speedup_points(results, names) -> rows for charts.speedups: each correct problem's speedup per
-- baseline of names and over its input
function M.speedup_points(results, names)
  local out = {}
  for _, r in ipairs(results or {}) do
    local sp = type(r.speedup) == "table" and r.speedup or {}
    if r.verified then
      for _, b in ipairs(columns(names, { "input" })) do
        if num(sp[b]) then out[#out + 1] = { problem = r.name, baseline = b, speedup = sp[b] } end
      end
    end
  end
  return out
end

local DEF_COLUMNS = { { key = "figure" }, { key = "definition" } }

-- definition_rows(defs) -> rows of the definitions the sweep saved with its figures (sweep.json
-- `definitions`), so a page states what its figures meant when they were computed
function M.definition_rows(defs)
  local rows = {}
  for k, v in pairs(type(defs) == "table" and defs or {}) do rows[#rows + 1] = { figure = k, definition = v } end
  table.sort(rows, function(a, b) return a.figure < b.figure end)
  return rows
end

-- write_sweep(dir) -> path of the sweep folder's index.html, from its sweep.json
function M.write_sweep(dir)
  local plan = run_data.read_json(dir, "sweep.json")
  if not plan or type(plan.problems) ~= "table" then
    return nil, dir .. (fs.exists(fs.join(dir, "sweep.json")) and "/sweep.json is not a sweep's record (damaged or not JSON)"
      or " has no sweep.json")
  end
  local agg = plan.aggregate or {}
  local body = { html.kv({ { "policy", esc(plan.policy) }, { "problems", tostring(#(plan.problems or {})) },
    { "mode", esc(plan.mode or "local") }, { "dtype", esc(table.concat(agg.dtypes or {}, ", ")) },
    { "devices", esc(table.concat(agg.devices or {}, ", ")) }, { "database", esc(plan.db or "-") } }) }
  local names = M.sweep_baselines(plan)
  body[#body + 1] = "<h2>Problems</h2>" .. html.table_html(problem_columns(names), M.problem_rows(dir, plan.results, names),
    { id = "problems" })
  body[#body + 1] = "<h2>Figures</h2>" .. html.table_html({ { key = "figure" }, { key = "value" } }, M.aggregate_rows(agg, names),
    { id = "figures" })
  local pts = M.speedup_points(plan.results, names)
  if #pts > 0 then body[#body + 1] = html.chart("spec-speedups", charts.speedups(pts, "speedup of the best kernel per problem")) end
  body[#body + 1] = "<h2>Definitions</h2>" .. html.table_html(DEF_COLUMNS, M.definition_rows(plan.definitions), { id = "definitions" })
  local path = fs.join(dir, "index.html")
  local ok, err = fs.write(path, html.page({ title = "kagent-rt sweep " .. fs.basename(fs.abspath(dir)),
    body = table.concat(body, "\n"), charts = #pts > 0, subtitle = esc(fs.abspath(dir)) }))
  if not ok then return nil, err end
  return path
end

return M
