-- What agents/compare.lua reports per policy: the figures of its sweep (agents/tools/sweep/
-- figures.lua: the same definitions, never a second copy), side by side, as a Markdown table,
-- JSON and an HTML page with one chart per figure.
local fs = require("kagent.fs")
local json = require("kagent.json")
local figures = require("agents.tools.sweep.figures")
local html = require("agents.tools.report.html")
local charts = require("agents.tools.report.charts")

local M = {}

local function num(v) return type(v) == "number" and v or nil end

-- The figures compared, each read from a sweep's aggregate: {key, title, get(agg), fmt}.
M.METRICS = {
  { key = "correctness_rate", title = "correctness rate", get = function(a) return num(a.correctness_rate) end, fmt = ".0%" },
  { key = "fast_1.0_eager", title = "fast_1.0 vs eager", get = function(a) return num(a.fast_p.eager["1.0"]) end, fmt = ".0%" },
  { key = "fast_1.2_eager", title = "fast_1.2 vs eager", get = function(a) return num(a.fast_p.eager["1.2"]) end, fmt = ".0%" },
  { key = "fast_1.0_compile", title = "fast_1.0 vs compile", get = function(a) return num(a.fast_p.compile["1.0"]) end, fmt = ".0%" },
  { key = "fast_1.2_compile", title = "fast_1.2 vs compile", get = function(a) return num(a.fast_p.compile["1.2"]) end, fmt = ".0%" },
  { key = "geomean_eager", title = "geomean speedup vs eager", get = function(a) return num(a.speedup.eager.geomean) end, fmt = ".3f" },
  { key = "geomean_compile", title = "geomean speedup vs compile", get = function(a) return num(a.speedup.compile.geomean) end, fmt = ".3f" },
  { key = "attempts_to_best", title = "attempts to reach the best (median)",
    get = function(a) return a.attempts_to_best and num(a.attempts_to_best.median) end, fmt = ".1f" },
  { key = "tokens", title = "tokens", get = function(a) return num(a.tokens) end, fmt = "," },
  { key = "wall_s", title = "wall time (s)", get = function(a) return num(a.wall_s) end, fmt = ".1f" },
}

-- models_of(rows) -> {model = {attempts, verified, improved, best (runs whose best kernel it
-- wrote), tokens, cost_usd (null when some run had no price for it)}} over a sweep's runs
function M.models_of(rows)
  local out = {}
  for _, r in ipairs(rows or {}) do
    for m, e in pairs(type(r.models) == "table" and r.models or {}) do
      local t = out[m] or { attempts = 0, verified = 0, improved = 0, best = 0, tokens = 0, cost_usd = 0 }
      out[m] = t
      t.attempts, t.verified = t.attempts + (num(e.attempts) or 0), t.verified + (num(e.verified) or 0)
      t.improved, t.tokens = t.improved + (num(e.improved) or 0), t.tokens + (num(e.tokens) or 0)
      if e.best == true then t.best = t.best + 1 end
      if num(t.cost_usd) and num(e.cost_usd) then t.cost_usd = t.cost_usd + e.cost_usd else t.cost_usd = json.null end
    end
  end
  return out
end

-- policy_result(name, plan) -> {policy, folder, aggregate, results, figures = {key = value}, replay, models}
function M.policy_result(name, plan, folder)
  local agg = plan.aggregate or {}
  local out = { policy = name, folder = folder, aggregate = agg, results = plan.results or {}, figures = {},
    replay = agg.replay or { hits = 0, misses = 0, sent = 0, calls = 0 }, models = M.models_of(plan.results) }
  for _, m in ipairs(M.METRICS) do
    local ok, v = pcall(m.get, agg)
    out.figures[m.key] = ok and v or json.null
  end
  return out
end

local function cell(v, fmt)
  if type(v) ~= "number" then return "-" end
  if fmt == ".0%" then return string.format("%.0f%%", 100 * v) end
  if fmt == "," then return string.format("%d", v) end
  return string.format("%" .. fmt, v)
end

-- table_text(results, meta) -> the Markdown table printed at the end
function M.table_text(list, meta)
  local head, rule = { "| policy" }, { "|---" }
  for _, m in ipairs(M.METRICS) do head[#head + 1] = " | " .. m.title; rule[#rule + 1] = "|---" end
  head[#head + 1] = " | LLM calls: replayed / missed / sent |"
  rule[#rule + 1] = "|---|"
  local out = { string.format("%d policies over %d problem(s); LLM %s", #list, meta.problems or 0, meta.llm or "?"), "",
    table.concat(head), table.concat(rule) }
  for _, r in ipairs(list) do
    local line = { "| " .. r.policy }
    for _, m in ipairs(M.METRICS) do line[#line + 1] = " | " .. cell(r.figures[m.key], m.fmt) end
    line[#line + 1] = string.format(" | %d / %d / %d |", r.replay.hits, r.replay.misses, r.replay.sent)
    out[#out + 1] = table.concat(line)
  end
  local per = { "", "Per model: | policy | model | attempts | verified | improved | best found (runs) | tokens | cost $ |",
    "|---|---|---|---|---|---|---|---|" }
  for _, r in ipairs(list) do
    local names = {}
    for m in pairs(r.models or {}) do names[#names + 1] = m end
    table.sort(names)
    for _, m in ipairs(names) do
      local e = r.models[m]
      per[#per + 1] = string.format("| %s | %s | %d | %d | %d | %d | %d | %s |", r.policy, m, e.attempts, e.verified,
        e.improved, e.best, e.tokens, num(e.cost_usd) and string.format("%.4f", e.cost_usd) or "unknown")
    end
  end
  if #per > 3 then for _, l in ipairs(per) do out[#out + 1] = l end end
  out[#out + 1] = ""
  out[#out + 1] = "Definitions: docs/sweeps.md (the sweep figures); each policy's sweep folder has its per-problem table."
  return table.concat(out, "\n")
end

-- json_doc(list, meta) -> compare.json
function M.json_doc(list, meta)
  local policies = {}
  for i, r in ipairs(list) do
    policies[i] = { policy = r.policy, folder = r.folder, figures = r.figures, replay = r.replay, aggregate = r.aggregate,
      results = r.results, models = r.models }
  end
  return { meta = meta, policies = policies, definitions = figures.DEFINITIONS }
end

-- write_html(dir, list, meta) -> path of dir/index.html: the table, one chart per figure, links to
-- each policy's sweep page
function M.write_html(dir, list, meta)
  local cols = { { key = "policy_html", title = "policy", fmt = function(r) return r.policy_html end } }
  for _, m in ipairs(M.METRICS) do
    cols[#cols + 1] = { key = m.key, title = m.title, fmt = function(r) return html.esc(cell(r.figures[m.key], m.fmt)) end }
  end
  cols[#cols + 1] = { key = "replay", title = "LLM calls replayed / missed / sent",
    fmt = function(r) return string.format("%d / %d / %d", r.replay.hits, r.replay.misses, r.replay.sent) end }
  local rows = {}
  for i, r in ipairs(list) do
    rows[i] = { policy_html = string.format('<a href="%s/index.html">%s</a>', html.esc(r.policy), html.esc(r.policy)),
      figures = r.figures, replay = r.replay }
  end
  local body = { html.kv({ { "problems", tostring(meta.problems) }, { "LLM", html.esc(meta.llm) },
    { "run options", html.esc(meta.run_args or "") } }) }
  body[#body + 1] = "<h2>Policies</h2>" .. html.table_html(cols, rows, { id = "compare" })
  local mrows = {}
  for _, r in ipairs(list) do
    for m, e in pairs(r.models or {}) do
      mrows[#mrows + 1] = { policy = r.policy, model = m, attempts = e.attempts, verified = e.verified,
        improved = e.improved, best = e.best, tokens = e.tokens, cost_usd = e.cost_usd }
    end
  end
  table.sort(mrows, function(a, b) return a.policy .. a.model < b.policy .. b.model end)
  if #mrows > 0 then
    body[#body + 1] = "<h2>Models</h2>" .. html.table_html({ { key = "policy" }, { key = "model" }, { key = "attempts" },
      { key = "verified" }, { key = "improved" }, { key = "best", title = "best found (runs)" }, { key = "tokens" },
      { key = "cost_usd", title = "cost $", fmt = function(r)
        return num(r.cost_usd) and string.format("%.4f", r.cost_usd) or "unknown (no price)" end } }, mrows, { id = "models" })
  end
  body[#body + 1] = '<h2>Figures</h2><div class="cols">'
  for _, m in ipairs(M.METRICS) do
    local values = {}
    for _, r in ipairs(list) do
      local v = r.figures[m.key]
      if type(v) == "number" then values[#values + 1] = { policy = r.policy, value = v } end
    end
    body[#body + 1] = "<div>" .. (#values > 0 and html.chart("spec-" .. m.key:gsub("[^%w]", "-"), charts.metric_bars(values, m.title, m.fmt))
      or ("<h3>" .. html.esc(m.title) .. '</h3><p class="note">not measured</p>')) .. "</div>"
  end
  body[#body + 1] = "</div>"
  body[#body + 1] = "<h2>Definitions</h2>" .. html.table_html({ { key = "figure" }, { key = "definition" } },
    require("agents.tools.report.index_page").definition_rows(), { id = "definitions" })
  local path = fs.join(dir, "index.html")
  local ok, err = fs.write(path, html.page({ title = "kagent-rt policy comparison", body = table.concat(body, "\n"),
    charts = true, subtitle = html.esc(fs.abspath(dir)) }))
  if not ok then return nil, err end
  return path
end

return M
