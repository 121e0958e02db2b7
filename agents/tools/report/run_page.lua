-- report.html of one run: the header figures, the convergence and attempts chart, the lineage
-- tree, the per-round table, input vs best (key metrics, roofline position, the diff), LLM
-- usage per role and how usable the model's replies were. Built from the run folder (agents/tools/report/run_data.lua).
local html = require("agents.tools.report.html")
local charts = require("agents.tools.report.charts")
local run_data = require("agents.tools.report.run_data")
local verdict = require("agents.lib.verdict")
local generality = require("agents.lib.generality")
local own_share = require("agents.lib.own_share")
local json = require("kagent.json")
local fs = require("kagent.fs")

local M = {}

local esc, fmt = html.esc, html.fmt

-- how often the page of a running run reloads itself
M.REFRESH_S = 10

local function x(v) return type(v) == "number" and string.format("%.3fx", v) or "-" end

-- shapes_text(s) -> whether the best works beyond the problem's shapes (the confirmation's resized
-- problem; agents/lib/generality.lua words it)
local function shapes_text(s)
  local no = generality.of_summary(s, true)
  if no then return '<span class="err">' .. esc(no) .. "</span>" end
  local pg = type(s.preferred_general) == "table" and ("; chosen over " .. esc(s.preferred_general.over)
    .. ", as fast within noise, which does not") or ""
  return ({ yes = "verified on the problem resized" .. pg, ["n/a"] = "not checked (the problem has no size constants)" })[s.generalizes] or "-"
end

-- own_share_text(s) -> ": own kernels carry 42% of the GPU time (library: ...)" where the best's
-- verdict has the share (agents/search/summary.lua, add_library), ": own share unknown: <why>"
-- where it says why not (CPU mode), else ""
local function own_share_text(s)
  if type(s.own_share_unknown) == "string" then return ": own share unknown: " .. esc(s.own_share_unknown) end
  if type(s.own_share) ~= "number" then return "" end
  local names = own_share.names(s)  -- the names as every table shows them (agents/lib/own_share.lua)
  return string.format(": own kernels carry %.0f%% of the GPU time%s", 100 * s.own_share,
    names ~= "" and (" (library: " .. esc(names) .. ")") or "")
end

-- best_text(summary, shown) -> the header's best kernel: the confirmed one, or while the run goes
-- the best so far as the search measured it (state.json), labelled so
local function best_text(s, shown)
  local b = shown.best or {}
  if b.id or not s.search_best then
    return esc(b.id or "-") .. string.format(" (round %s): %s ms", tostring(b.round or "-"), fmt(shown.best_ms))
  end
  local sb = s.search_best
  return esc(sb.id or "-") .. string.format(" (round %s): %s ms so far, as the search measured it (not confirmed yet)",
    tostring(sb.round or "-"), fmt(sb.time_ms))
end

-- The run folder's files the header links to; a file not (yet) written has no link.
M.FILES = { "summary.json", "best_kernel.py", "input_kernel.py", "usage.csv", "rounds/" }

-- files_text(dir) -> links to those of M.FILES that exist in the run folder dir
local function files_text(dir)
  local out = {}
  for _, f in ipairs(M.FILES) do
    if fs.exists(fs.join(dir, (f:gsub("/$", "")))) then out[#out + 1] = string.format('<a href="%s">%s</a>', esc(f), esc(f)) end
  end
  return #out > 0 and table.concat(out, " · ") or "-"
end

local function header(d)
  local s = d.summary
  local r = s.replay or {}
  -- a summary written before unconfirmed runs had none may still carry search-time figures:
  -- they are shown only for a confirmed run (agents/lib/verdict.lua, reportable)
  local shown = verdict.reportable(s) and s or { run_id = s.run_id }
  local confirmed = s.verified == true and "yes (timed beside the baselines as they were, and confirmed by a fresh "
      .. "process with new inputs before every call)"
    or d.running and "not yet (the run is still going)"
    or '<span class="err">not confirmed: ' .. esc(s.error or "no finalist passed the final confirmation")
      .. "; no figure is reported</span>"
  return html.kv({
    { "run", esc(s.run_id) .. (d.started and (" (" .. esc(d.started) .. ")") or "") },
    { "problem", esc(s.problem) },
    { "policy / mode", esc(s.policy) .. " / " .. esc(s.mode) },
    { "device, dtype", esc(s.device) .. ", " .. esc(s.dtype) },
    { "language / library", esc(s.language or "triton") .. " / " .. esc(s.library or "own") .. own_share_text(shown) },
    { "model", esc(s.model == nil and "-" or s.model) },
    { "best kernel", best_text(s, shown) },
    { "input kernel", (type(shown.input_ms) == "number" and (fmt(shown.input_ms) .. " ms re-timed beside the best; ") or "")
      .. fmt(d.input_ms) .. " ms as the search measured it at the start (the chart's round 0)" },
    { "speedup", string.format("%s vs input (both re-timed at the end), %s vs eager, %s vs torch.compile, %s vs max-autotune",
      x(shown.speedup_vs_input), x(shown.speedup_vs_eager), x(shown.speedup_vs_compile),
      x(shown.speedup_vs_compile_max_autotune)) },
    { "speed of light", type(shown.sol_pct) == "number" and string.format("%.1f%%", shown.sol_pct) or "- (no roofline: CPU mode or no profile)" },
    { "confirmed", confirmed },
    { "other shapes", shapes_text(shown) },
    { "rounds", string.format("%s of %s; stopped: %s", tostring(s.rounds), tostring(s.rounds_requested or "-"), esc(s.stop_reason or "-")) },
    { "attempts", string.format("%s (best reached after %s)", tostring(s.attempts or 0), tostring(s.attempts_to_best or "-")) },
    { "LLM", string.format("%s call(s), %s tokens, $%.4f", tostring(s.llm_calls or 0),
      tostring(s.tokens and s.tokens.total or 0), type(s.cost_usd) == "number" and s.cost_usd or 0) },
    { "replay", r.mode and r.mode ~= "off" and string.format("%s: %d hit(s), %d miss(es)%s", esc(r.mode), r.hits or 0, r.misses or 0,
      (r.misses or 0) > 0 and ' <span class="err">(questions without a recorded answer: replay_misses.json)</span>' or "") or "off" },
    { "wall", type(s.wall_s) == "number" and string.format("%.1f s", s.wall_s) .. (d.running and " so far (at the last round's save)" or "")
      or "-" },
    { "files", files_text(d.dir) },
  })
end

local ROUND_COLUMNS = {
  { key = "round" }, { key = "worker" }, { key = "parent" },
  { key = "bottleneck", title = "bottleneck (direction)" }, { key = "skill" },
  { key = "outcome", fmt = function(r)
    if r.outcome == "failed" then return "failed at " .. esc(r.stage) end
    local text = esc(r.outcome) .. (r.duplicate_of and (" of " .. esc(r.duplicate_of)) or "")
    -- the promotion gate's reason on hover: why a verified kernel was improved, same or slower
    return r.promotion and string.format('<span title="%s">%s</span>', esc(r.promotion), text) or text
  end },
  { key = "time_ms", title = "time ms (p10-p90)", fmt = function(r)
    if not r.time_ms then return "-" end
    return fmt(r.time_ms) .. (r.spread and (" (" .. esc(r.spread) .. ")") or "")
  end },
  { key = "vs_parent", title = "x parent", fmt = "%.3f" }, { key = "vs_input", title = "x input", fmt = "%.3f" },
  { key = "tries" },
  { key = "files", fmt = function(r)
    local out = {}
    for _, l in ipairs(r.links or {}) do out[#out + 1] = string.format('<a href="%s">%s</a>', esc(l[2]), esc(l[1])) end
    if r.has_diff then
      out[#out + 1] = string.format('<a href="#diff" class="diff-link" data-id="%s" data-parent="%s">diff vs %s</a>',
        esc(r.id), esc(r.parent or "input"), esc(r.parent or "input"))
    end
    return table.concat(out, " · ")
  end },
  { key = "error", fmt = function(r) return esc(tostring(r.error or ""):sub(1, 160)) end },
}

-- Both sides of every diff carry one file name: diff2html tags a diff whose two names differ
-- "RENAMED", which no kernel was; the section's title says which two kernels it compares.
M.DIFF_NAME = "kernel.py"

-- An attempt's "diff vs parent" link redraws the diff section with that pair (sources embedded
-- in the page as attempt-codes: a page from disk may not read other files).
local ATTEMPT_DIFF = ([[
(function(){
  var el=document.getElementById('attempt-codes'); if(!el) return;
  var codes=JSON.parse(el.textContent);
  document.querySelectorAll('a.diff-link').forEach(function(a){a.addEventListener('click',function(ev){
    ev.preventDefault();
    var id=a.getAttribute('data-id'),par=a.getAttribute('data-parent'),d=document.getElementById('diff');
    d.innerHTML='';
    var patch=Diff.createTwoFilesPatch('@DIFF_NAME@','@DIFF_NAME@',codes[par],codes[id],'','',{context:3});
    var ui=new Diff2HtmlUI(d,patch,{drawFileList:false,matching:'lines',outputFormat:'side-by-side',highlight:true,
      synchronisedScroll:true,fileContentToggle:false});
    ui.draw();ui.highlightCode();
    d.setAttribute('data-shown',par+' -> '+id);d.setAttribute('data-rendered','1');
    document.getElementById('diff-title').textContent='Kernel diff ('+par+' \u2192 '+id+')';
    d.scrollIntoView();
  });});
})();
]]):gsub("@DIFF_NAME@", M.DIFF_NAME)

-- options(d) -> the run's options (state.json), sorted, as a grid
local function options_panel(d)
  local keys = {}
  for k, v in pairs(d.options or {}) do
    if v ~= false and v ~= json.null and type(v) ~= "table" then keys[#keys + 1] = k end
  end
  table.sort(keys)
  local list = {}
  for _, k in ipairs(keys) do list[#list + 1] = { "--" .. k:gsub("_", "-"), esc(tostring(d.options[k])) } end
  return html.kv(list)
end

local function side_table(d)
  local cols = { { key = "metric" },
    { key = "input", title = "input kernel", fmt = function(r) return esc(fmt(r.input, r.fmt)) end },
    { key = "best", title = "best kernel", fmt = function(r) return esc(fmt(r.best, r.fmt)) end } }
  return html.table_html(cols, d.side, { id = "metrics" })
end

local USAGE_COLUMNS = { { key = "role" }, { key = "calls" }, { key = "input_tokens", title = "input" },
  { key = "output_tokens", title = "output" }, { key = "cache_read_tokens", title = "cache read" },
  { key = "cache_write_tokens", title = "cache write" }, { key = "tokens", title = "total" },
  { key = "cost_usd", title = "cost $", fmt = "%.4f" }, { key = "latency_s", title = "LLM seconds", fmt = "%.1f" } }

local REPLY_COLUMNS = { { key = "role" }, { key = "used" }, { key = "repaired" }, { key = "reasked", title = "re-asked" },
  { key = "lost" }, { key = "continued", title = "continued (cut at the limit)" },
  { key = "shortened", title = "shortened (context)" },
  { key = "directions_model", title = "directions from the model" },
  { key = "directions_rules", title = "directions from rules" } }

-- replies_section(s) -> the reply-quality table of summary.json's `replies` (agents/run/reply_stats.lua)
local function replies_section(s)
  local r = s.replies
  if type(r) ~= "table" or type(r.by_role) ~= "table" then
    return '<p class="note">No reply counts (a run from before they were kept).</p>'
  end
  local rows = {}
  for role, e in pairs(r.by_role) do
    local row = { role = role }
    for k, v in pairs(e) do row[k] = v end
    rows[#rows + 1] = row
  end
  table.sort(rows, function(a, b) return a.role < b.role end)
  if #rows == 0 then return '<p class="note">No replies.</p>' end
  local t = r.totals or {}
  local out = {}
  if type(t.rules_share) == "number" then
    local warn = type(r.rules_warn) == "number" and t.rules_share > r.rules_warn
    out[#out + 1] = string.format('<p class="%s">%.0f%% of the directions came from the skills\' rules, not the model%s.</p>',
      warn and "err" or "note", 100 * t.rules_share, warn and " — a mostly rule-driven run" or "")
  end
  out[#out + 1] = html.table_html(REPLY_COLUMNS, rows, { id = "replies" })
  return table.concat(out, "\n")
end

local MODEL_COLUMNS = { { key = "model" }, { key = "attempts" }, { key = "verified" }, { key = "improved" },
  { key = "share_improved", title = "share of improvements", fmt = function(r)
    return type(r.share_improved) == "number" and string.format("%.0f%%", 100 * r.share_improved) or "-"
  end },
  { key = "best", title = "wrote the best", fmt = function(r) return r.best == true and "yes" or "" end },
  { key = "calls", title = "LLM calls" }, { key = "tokens" },
  { key = "cost_usd", title = "cost $", fmt = function(r)
    return type(r.cost_usd) == "number" and string.format("%.4f", r.cost_usd) or "unknown (no price)"
  end } }

-- models_section(s) -> the per-model table of summary.json's `models` (agents/run/models.lua)
local function models_section(s)
  local rows = {}
  for m, e in pairs(type(s.models) == "table" and s.models or {}) do
    local row = { model = m }
    for k, v in pairs(e) do row[k] = v end
    rows[#rows + 1] = row
  end
  if #rows == 0 then return '<p class="note">No model answered (the LLM-free tuner, or a run from before models were counted).</p>' end
  table.sort(rows, function(a, b) return a.model < b.model end)
  return html.table_html(MODEL_COLUMNS, rows, { id = "models" })
end

-- render(d) -> the page for run data d (agents/tools/report/run_data.lua)
function M.render(d)
  local s = d.summary
  local body = {}
  if d.stopped and not d.summary.verified then
    body[1] = string.format('<p class="running" id="stopped">Stopped after round %s: %s. '
      .. "<code>kagent-rt %s --resume %s</code> continues it.</p>", tostring(s.rounds), esc(d.stopped),
      "agents/beam.lua", esc(d.dir))
  elseif d.running then
    body[1] = string.format('<p class="running" id="running">Running: round %s of %s done. This page reloads '
      .. 'every %d s; the run rewrites it after every round.</p>', tostring(s.rounds), tostring(s.rounds_requested or "?"),
      M.REFRESH_S)
  end
  body[#body + 1] = header(d)
  body[#body + 1] = "<h2>Convergence</h2>"
  if #d.best_series > 0 or #d.timed > 0 or #d.failed > 0 then
    body[#body + 1] = '<p class="note">Line: the best kernel at the end of each round (search-time medians). '
      .. "Points: every attempt, coloured by outcome (workers of a round side by side). Dashed: the baselines and the "
      .. "speed-of-light bound, from the final re-measure. Failed attempts have no time; they are shown below by the "
      .. "stage that rejected them (a timing the evaluator could not trust fails at stage timing).</p>"
    body[#body + 1] = html.chart("spec-convergence", charts.convergence({ best = d.best_series, attempts = d.timed,
      failed = d.failed, lines = d.lines, rounds = d.rounds }))
  else
    body[#body + 1] = '<p class="note">No rounds ran.</p>'
  end
  body[#body + 1] = "<h2>Lineage</h2>"
  if #d.rows > 0 then
    body[#body + 1] = '<p class="note">Each attempt under the kernel it started from; the best kernel is ringed.</p>'
    body[#body + 1] = html.chart("spec-lineage", charts.lineage(d.lineage))
  else
    body[#body + 1] = '<p class="note">No attempts.</p>'
  end
  body[#body + 1] = "<h2>Attempts by round</h2>"
  for _, r in ipairs(d.rows) do if r.outcome == "failed" then r._class = "failed" end end
  body[#body + 1] = html.table_html(ROUND_COLUMNS, d.rows, { id = "rounds" })
  body[#body + 1] = "<h2>Input vs best</h2><div class=\"cols\"><div>"
  body[#body + 1] = '<p class="note" id="metrics-method">Times and speedups: ' .. esc(run_data.SIDE_METHOD)
    .. "; counters from each kernel's own profile.</p>" .. side_table(d) .. "</div><div>"
  if d.roof and s.verified ~= true then
    body[#body + 1] = '<p class="note">The roofline position comes with the final confirmation\'s figures.</p>'
  elseif d.roof then
    local pts = {}
    -- the table's figures (one method, the confirmation's)
    if type(s.input_ms) == "number" then pts[#pts + 1] = { kernel = "input", time_ms = s.input_ms } end
    if type(s.best_ms) == "number" then pts[#pts + 1] = { kernel = "best", time_ms = s.best_ms } end
    body[#body + 1] = html.chart("spec-roofline", charts.roofline(pts, d.roof), "Roofline position ("
      .. tostring(d.roof.binding or "?") .. "-bound by the compulsory traffic and FLOPs)")
  else
    body[#body + 1] = '<p class="note">No roofline: the evaluator reports none in CPU mode (no GPU peaks).</p>'
  end
  body[#body + 1] = "</div></div>"
  body[#body + 1] = '<h3 id="diff-title">Kernel diff (input → best)</h3>'
  if d.input_code and d.best_code then
    body[#body + 1] = '<div id="diff"></div>' .. html.json_data("diff-data", { name = M.DIFF_NAME,
      old_text = d.input_code, new_text = d.best_code })
  else
    body[#body + 1] = '<p class="note">' .. (d.running and "No best kernel yet (the run is still going)"
      or "input_kernel.py or best_kernel.py is missing") .. '; an attempt\'s "diff vs" link shows it against its parent.</p>'
      .. '<div id="diff"></div>'
  end
  local has_codes = next(d.codes or {}) ~= nil
  if has_codes then body[#body + 1] = html.json_data("attempt-codes", d.codes) end
  body[#body + 1] = "<h2>LLM usage by role</h2>"
  if #d.by_role > 0 then
    body[#body + 1] = html.table_html(USAGE_COLUMNS, d.by_role, { id = "usage" })
    body[#body + 1] = html.chart("spec-tokens", charts.tokens_by_role(d.by_role))
  else
    body[#body + 1] = '<p class="note">No LLM calls (the LLM-free tuner, or no usage.csv).</p>'
  end
  body[#body + 1] = "<h2>Options</h2>"
  body[#body + 1] = d.options and options_panel(d) or '<p class="note">No state.json: the options are unknown.</p>'
  body[#body + 1] = "<h2>Models</h2>"
  body[#body + 1] = '<p class="note">What each model wrote (the model of the reply that gave an attempt its kernel) and '
    .. "what it cost; a model without a price (--prices) has its cost shown as unknown.</p>"
  body[#body + 1] = models_section(s)
  body[#body + 1] = "<h2>Replies by role</h2>"
  body[#body + 1] = '<p class="note">Used as they came, repaired (sloppy JSON, renamed keys, class Model, a diff, a '
    .. "reply continued after the length limit or a prompt shortened after a context error), re-asked with the reason "
    .. "quoted, or lost (a failed reply, never a kernel failure).</p>"
  body[#body + 1] = replies_section(s)
  return html.page({ title = "kagent-rt run " .. tostring(s.run_id), body = table.concat(body, "\n"), charts = true,
    diff = (d.input_code ~= nil and d.best_code ~= nil) or has_codes, refresh = d.running and M.REFRESH_S or nil,
    script = has_codes and ATTEMPT_DIFF or nil,
    subtitle = esc(s.problem) .. " · " .. esc(s.policy) .. " · " .. esc(s.device) .. ' · <a href="../index.html">all runs</a>' })
end

-- write(dir) -> path of dir/report.html, or nil, why
function M.write(dir)
  local d, err = run_data.load(dir)
  if not d then return nil, err end
  local path = fs.join(dir, "report.html")
  local ok, werr = fs.write(path, M.render(d))
  if not ok then return nil, werr end
  return path
end

return M
