-- Index pages: runs/index.html (every run folder under a folder of runs: problem, policy, best
-- speedups, date) and a sweep folder's index.html (its problems, figures and definitions).
local fs = require("kagent.fs")
local html = require("agents.tools.report.html")
local charts = require("agents.tools.report.charts")
local run_data = require("agents.tools.report.run_data")
local figures = require("agents.tools.sweep.figures")
local confirm = require("agents.search.confirm")
local baselines = require("agents.lib.baselines")

local M = {}

local esc = html.esc

local function num(v) return type(v) == "number" and v or nil end

local function link(href, text) return string.format('<a href="%s">%s</a>', esc(href), esc(text)) end

-- run_row(name, summary) -> one row of the runs table
local function run_row(name, s, has_report)
  -- figures only from a confirmed run (a summary from before may carry search-time ones)
  local f = confirm.reportable(s) and s or {}
  return { name = name, run = has_report and link(name .. "/report.html", name) or esc(name),
    started = run_data.started(s.run_id or name) or "-", problem = fs.basename(tostring(s.problem or "?")),
    policy = s.policy or "-", mode = s.mode or "-", dtype = s.dtype or "-", device = s.device or "-",
    best_ms = num(f.best_ms), x_input = num(f.speedup_vs_input), x_eager = num(f.speedup_vs_eager),
    x_compile = num(f.speedup_vs_compile), verified = confirm.verdict_word(s),
    rounds = s.rounds or "-", tokens = s.tokens and s.tokens.total or 0,
    replay = s.replay and s.replay.mode ~= "off" and string.format("%s %d/%d", s.replay.mode, s.replay.hits or 0,
      s.replay.calls or 0) or "-" }
end

local RUN_COLUMNS = { { key = "run", fmt = function(r) return r.run end }, { key = "started" }, { key = "problem" },
  { key = "policy" }, { key = "mode" }, { key = "dtype" }, { key = "device" }, { key = "best_ms", title = "best ms", fmt = "%.4f" },
  { key = "x_input", title = "x input", fmt = "%.3f" }, { key = "x_eager", title = "x eager", fmt = "%.3f" },
  { key = "x_compile", title = "x compile", fmt = "%.3f" }, { key = "verified" }, { key = "rounds" }, { key = "tokens" },
  { key = "replay", title = "replay hits/calls" } }

-- runs(folder) -> rows of the run folders under folder that finished (a summary.json), newest first
function M.runs(folder)
  local rows = {}
  for _, name in ipairs(fs.list(folder) or {}) do
    local dir = fs.join(folder, name)
    local s = fs.is_dir(dir) and run_data.read_json(dir, "summary.json")
    if s then rows[#rows + 1] = run_row(name, s, fs.exists(fs.join(dir, "report.html"))) end
  end
  table.sort(rows, function(a, b) return a.started .. a.name > b.started .. b.name end)
  return rows
end

-- curves(folder, rows) -> every run's best per round as a speedup over its own start (runs of
-- different problems share one axis that way), for the overlay chart
function M.curves(folder, rows)
  local pts = {}
  for _, r in ipairs(rows) do
    local dir = fs.join(folder, r.name)
    local s, st = run_data.read_json(dir, "summary.json"), run_data.read_json(dir, "state.json")
    local series = s and run_data.best_per_round(dir, s, st) or {}
    local start = series[1] and series[1].round == 0 and series[1].time_ms
    if start then
      for _, b in ipairs(series) do
        pts[#pts + 1] = { run = r.name, problem = r.problem, round = b.round, time_ms = b.time_ms, speedup = start / b.time_ms }
      end
    end
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
  local rows = M.runs(folder)
  local body = { '<p class="note">A click on a column header sorts by it; the box keeps the rows that contain its text.</p>'
    .. '<input id="filter" type="search" placeholder="filter runs (problem, policy, model, ...)" size="40">' }
  body[#body + 1] = #rows > 0 and html.table_html(RUN_COLUMNS, rows, { id = "runs" })
    or '<p class="note">No finished run in this folder yet.</p>'
  local pts = M.curves(folder, rows)
  if #pts > 0 then
    body[#body + 1] = "<h2>Convergence of every run</h2>"
      .. '<p class="note">The best kernel at the end of each round as a speedup over the run\'s own start (search-time '
      .. "medians), one line per run; a click on a run in the legend picks it out.</p>"
      .. html.chart("spec-overlay", charts.overlay(pts))
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

local PROBLEM_COLUMNS = { { key = "name_html", title = "problem", fmt = function(r) return r.name_html end },
  { key = "status" }, { key = "correct" }, { key = "input_ms", title = "input ms", fmt = "%.4f" },
  { key = "best_ms", title = "best ms", fmt = "%.4f" }, { key = "eager_ms", title = "eager ms", fmt = "%.4f" },
  { key = "compile_ms", title = "compile ms", fmt = "%.4f" }, { key = "x_eager", title = "x eager", fmt = "%.3f" },
  { key = "x_compile", title = "x compile", fmt = "%.3f" }, { key = "x_input", title = "x input", fmt = "%.3f" },
  { key = "rounds" }, { key = "attempts_to_best", title = "attempts to best" }, { key = "tokens" },
  { key = "problem_time", title = "time" } }

-- problem_rows(dir, results) -> the sweep's rows for the table, with links to each run's report
function M.problem_rows(dir, results)
  local rows = {}
  for i, r in ipairs(results or {}) do
    local rd = type(r.run_dir) == "string" and r.run_dir or nil
    local has = rd and fs.exists(fs.join(rd, "report.html"))
    local sp = type(r.speedup) == "table" and r.speedup or {}
    rows[i] = { name_html = has and link(relative(fs.join(rd, "report.html"), dir), r.name) or esc(r.name),
      status = r.status, correct = r.correct, input_ms = num(r.input_ms), best_ms = num(r.best_ms),
      eager_ms = num(r.eager_ms), compile_ms = num(r.compile_ms), x_eager = num(sp.eager), x_compile = num(sp.compile),
      x_input = num(sp.input), rounds = r.rounds or "-", attempts_to_best = r.attempts_to_best or "-",
      tokens = r.tokens or 0, problem_time = figures.hms(r.problem_s) }
  end
  return rows
end

-- aggregate_rows(agg) -> {figure, value} rows of a sweep's aggregate, in the words of figures.lua
function M.aggregate_rows(agg)
  local rows = {}
  local function add(k, v) rows[#rows + 1] = { figure = k, value = v } end
  local function pct(v) return type(v) == "number" and string.format("%.0f%%", 100 * v) or "not measured" end
  add("correct", string.format("%d of %d (%s)", agg.correct or 0, agg.problems or 0, pct(agg.correctness_rate)))
  for _, b in ipairs(baselines.REPORTED) do
    local f = agg.fast_p and agg.fast_p[b] or {}
    add("fast_1.0 / fast_1.2 vs " .. b, pct(f["1.0"]) .. " / " .. pct(f["1.2"]))
  end
  for _, b in ipairs({ "eager", "compile", "input" }) do
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
  add("sweep wall, problem time", figures.hms(agg.wall_s) .. ", " .. figures.hms(agg.problem_s))
  return rows
end

-- speedup_points(results) -> rows for charts.speedups: each correct problem's speedup per baseline
function M.speedup_points(results)
  local out = {}
  for _, r in ipairs(results or {}) do
    local sp = type(r.speedup) == "table" and r.speedup or {}
    if r.verified then
      for _, b in ipairs({ "eager", "compile", "input" }) do
        if num(sp[b]) then out[#out + 1] = { problem = r.name, baseline = b, speedup = sp[b] } end
      end
    end
  end
  return out
end

local DEF_COLUMNS = { { key = "figure" }, { key = "definition" } }

function M.definition_rows(defs)
  local rows = {}
  for k, v in pairs(defs or figures.DEFINITIONS) do rows[#rows + 1] = { figure = k, definition = v } end
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
  body[#body + 1] = "<h2>Problems</h2>" .. html.table_html(PROBLEM_COLUMNS, M.problem_rows(dir, plan.results), { id = "problems" })
  body[#body + 1] = "<h2>Figures</h2>" .. html.table_html({ { key = "figure" }, { key = "value" } }, M.aggregate_rows(agg), { id = "figures" })
  local pts = M.speedup_points(plan.results)
  if #pts > 0 then body[#body + 1] = html.chart("spec-speedups", charts.speedups(pts, "speedup of the best kernel per problem")) end
  body[#body + 1] = "<h2>Definitions</h2>" .. html.table_html(DEF_COLUMNS, M.definition_rows(plan.definitions), { id = "definitions" })
  local path = fs.join(dir, "index.html")
  local ok, err = fs.write(path, html.page({ title = "kagent-rt sweep " .. fs.basename(fs.abspath(dir)),
    body = table.concat(body, "\n"), charts = #pts > 0, subtitle = esc(fs.abspath(dir)) }))
  if not ok then return nil, err end
  return path
end

return M
