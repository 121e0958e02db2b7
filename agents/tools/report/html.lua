-- Self-contained HTML pages: escaping, tables, and the page shell with the pinned browser
-- libraries of third_party/report/ inlined (a page opens from disk with no network). Charts are
-- Vega and Vega-Lite specs (data, built in agents/tools/report/charts.lua) that the page hands to
-- the libraries; the diff is drawn by jsdiff + diff2html (with highlight.js).
local fs = require("kagent.fs")
local json = require("kagent.json")

local M = {}

-- The libraries each kind of content needs, in load order (vega-lite needs vega first).
M.LIBS = {
  charts = { "vega.min.js", "vega-lite.min.js" },
  diff = { "diff.min.js", "diff2html-ui-slim.min.js" },
}
M.CSS = { diff = { "diff2html.min.css" } }

function M.esc(v)
  return (tostring(v == nil and "" or v):gsub("&", "&amp;"):gsub("<", "&lt;"):gsub(">", "&gt;"):gsub('"', "&quot;"))
end

local asset_cache = {}

-- asset(name) -> the text of third_party/report/<name> (found on kagent.path), ready to inline:
-- no source-map comment (a page must ask for nothing), no "</script" or "</style" that would
-- end the element early.
function M.asset(name)
  if asset_cache[name] then return asset_cache[name] end
  local path = kagent.resolve("third_party/report/" .. name)
  local text = path and fs.read(path)
  if not text then error("report: missing third_party/report/" .. name .. " (see scripts/vendor_report_libs.sh)") end
  text = text:gsub("\n?//# sourceMappingURL=[^\n]*", ""):gsub("/%*# sourceMappingURL=[^\n]-%*/", "")
  text = text:gsub("</([sS][cC][rR][iI][pP][tT])", "<\\/%1"):gsub("</([sS][tT][yY][lL][eE])", "<\\/%1")
  asset_cache[name] = text
  return text
end

-- json_data(id, value) -> a <script type="application/json"> element the page reads by id
function M.json_data(id, value)
  -- "<" only occurs inside JSON strings, where \u003c is the same character: no "</script>" or
  -- "<!--" can reach the HTML parser
  local text = json.encode(value):gsub("<", "\\u003c")
  return string.format('<script type="application/json" id="%s">%s</script>', M.esc(id), text)
end

-- fmt(v, pattern) -> formatted number, or "-" when v is not a number
function M.fmt(v, pattern)
  if type(v) ~= "number" or v ~= v then return "-" end
  return string.format(pattern or "%.4f", v)
end

-- table_html(columns, rows, opts) -> a <table>. columns: {{key, title, fmt = pattern | function(row)
-- -> html, class}}; rows: tables. Cells are escaped unless a column's fmt function returns html.
function M.table_html(columns, rows, opts)
  opts = opts or {}
  local out = { string.format('<table class="data"%s><thead><tr>', opts.id and (' id="' .. M.esc(opts.id) .. '"') or "") }
  for _, c in ipairs(columns) do out[#out + 1] = "<th>" .. M.esc(c.title or c.key) .. "</th>" end
  out[#out + 1] = "</tr></thead><tbody>"
  for _, r in ipairs(rows) do
    out[#out + 1] = string.format("<tr%s>", r._class and (' class="' .. M.esc(r._class) .. '"') or "")
    for _, c in ipairs(columns) do
      local v = r[c.key]
      local cell
      if type(c.fmt) == "function" then cell = c.fmt(r)
      elseif type(c.fmt) == "string" then cell = M.esc(M.fmt(v, c.fmt))
      else cell = M.esc(v == nil and "-" or v) end
      out[#out + 1] = "<td>" .. cell .. "</td>"
    end
    out[#out + 1] = "</tr>"
  end
  out[#out + 1] = "</tbody></table>"
  return table.concat(out)
end

-- A chart placeholder: the page's loader renders spec `id` (Vega or Vega-Lite) into it.
function M.chart(id, spec, title)
  return (title and ("<h3>" .. M.esc(title) .. "</h3>") or "")
    .. string.format('<div class="chart" data-spec="%s"></div>', M.esc(id)) .. M.json_data(id, spec)
end

local STYLE = [[
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1320px;padding:0 16px;color:#222}
h1{font-size:22px;margin:0 0 4px} h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd}
h3{font-size:15px;margin:14px 0 6px} .sub{color:#666;margin-bottom:14px}
table.data{border-collapse:collapse;margin:6px 0 12px;font-size:13px}
table.data th,table.data td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
table.data th{background:#f3f4f6} table.data tr.failed td{color:#a33}
.kv{display:grid;grid-template-columns:max-content auto;gap:2px 16px;font-size:13px}
.kv div:nth-child(odd){color:#555} .chart{margin:6px 0 14px;min-height:40px}
.note{color:#666;font-size:13px} .err{color:#b00;font-weight:600}
.cols{display:flex;gap:24px;flex-wrap:wrap} .running{background:#fff4d6;padding:6px 10px;border-radius:4px}
code,pre{font-family:ui-monospace,monospace;font-size:12px}
]]

-- The page's loader: renders every chart placeholder with the inlined libraries, then the diff.
-- A chart that fails says so on the page and on the console (the browser test fails on that).
local LOADER = [[
(function(){
  function spec(id){return JSON.parse(document.getElementById(id).textContent);}
  var charts=document.querySelectorAll('div.chart[data-spec]');
  var pending=[];
  charts.forEach(function(el){
    var s=spec(el.getAttribute('data-spec'));
    var vg=(s.$schema||'').indexOf('vega-lite')>=0?vegaLite.compile(s).spec:s;
    var view=new vega.View(vega.parse(vg),{renderer:'svg',container:el,hover:true});
    pending.push(view.runAsync().then(function(){el.setAttribute('data-rendered','1');}).catch(function(e){
      el.innerHTML='<p class="err">chart failed: '+String(e)+'</p>';console.error('chart '+el.getAttribute('data-spec')+': '+e);}));
  });
  var d=document.getElementById('diff');
  if(d&&document.getElementById('diff-data')){
    var src=spec('diff-data');
    var patch=Diff.createTwoFilesPatch(src.name,src.name,src.old_text,src.new_text,'','',{context:3});
    var ui=new Diff2HtmlUI(d,patch,{drawFileList:false,matching:'lines',outputFormat:'side-by-side',highlight:true,
      synchronisedScroll:true,fileContentToggle:false});
    ui.draw();ui.highlightCode();d.setAttribute('data-rendered','1');
  }
  Promise.all(pending).then(function(){document.body.setAttribute('data-charts-done',String(charts.length));});
})();
]]

-- page{title, subtitle, body, charts = bool, diff = bool, refresh = seconds, script = js} -> the
-- whole HTML text
function M.page(p)
  local head = { "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">",
    "<title>" .. M.esc(p.title) .. "</title>", "<style>" .. STYLE .. "</style>" }
  -- a page of something still running reloads itself (the run rewrites it after every round)
  if p.refresh then head[#head + 1] = string.format('<meta http-equiv="refresh" content="%d">', p.refresh) end
  local libs = {}
  local function add(kind)
    for _, name in ipairs(M.CSS[kind] or {}) do head[#head + 1] = "<style>" .. M.asset(name) .. "</style>" end
    for _, name in ipairs(M.LIBS[kind]) do libs[#libs + 1] = "<script>" .. M.asset(name) .. "</script>" end
  end
  if p.charts then add("charts") end
  if p.diff then add("diff") end
  local body = { "</head><body>", "<h1>" .. M.esc(p.title) .. "</h1>" }
  if p.subtitle then body[#body + 1] = '<div class="sub">' .. p.subtitle .. "</div>" end
  body[#body + 1] = p.body
  body[#body + 1] = table.concat(libs, "\n")
  if p.charts or p.diff then body[#body + 1] = "<script>" .. LOADER .. "</script>" end
  if p.script then body[#body + 1] = "<script>" .. p.script .. "</script>" end
  body[#body + 1] = "</body></html>\n"
  return table.concat(head, "\n") .. table.concat(body, "\n")
end

-- kv(pairs) -> a two-column grid of {label, html} pairs
-- hms(seconds) -> "h:mm:ss", "-" for anything but a number: durations in tables and pages
function M.hms(s)
  if type(s) ~= "number" then return "-" end
  return string.format("%d:%02d:%02d", math.floor(s / 3600), math.floor(s % 3600 / 60), math.floor(s % 60))
end

function M.kv(list)
  local out = { '<div class="kv">' }
  for _, p in ipairs(list) do out[#out + 1] = "<div>" .. M.esc(p[1]) .. "</div><div>" .. p[2] .. "</div>" end
  out[#out + 1] = "</div>"
  return table.concat(out)
end

return M
