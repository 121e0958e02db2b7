-- Chart specs for the HTML reports: Vega-Lite (and, for the lineage tree, Vega) specifications
-- as Lua tables. They are data: the libraries inlined in the page draw them. Pure functions.
local json = require("kagent.json")

local M = {}

local VL = "https://vega.github.io/schema/vega-lite/v6.json"
local VG = "https://vega.github.io/schema/vega/v6.json"

-- Outcomes of attempts and their colours (the same in every chart and table of a report).
M.OUTCOMES = { "input", "improved", "same", "slower", "duplicate", "failed" }
M.COLORS = { "#1f4e9c", "#2e9e44", "#8c8c8c", "#e08a1e", "#7b61c4", "#c93030" }

local function arr(t) return #t > 0 and t or json.empty_array end

local WIDTH = 860

-- time_scale(values) -> a Vega-Lite scale for times: logarithmic when they span more than 20x
local function time_scale(values)
  local lo, hi
  for _, v in ipairs(values) do
    if type(v) == "number" and v > 0 then
      lo, hi = math.min(lo or v, v), math.max(hi or v, v)
    end
  end
  if lo and hi / lo > 20 then return { type = "log" } end
  return { zero = false }
end

-- convergence{best, attempts, failed, lines, rounds} -> the best time per round (line), every timed
-- attempt as a point coloured by outcome, the baselines and the speed-of-light bound as rules,
-- and below, the attempts that failed (no time) by the stage that rejected them.
-- best: {{round, time_ms, id}}; attempts: {{x, round, worker, outcome, time_ms, ...}};
-- failed: {{x, round, worker, stage, error}}; lines: {{name, time_ms}}.
function M.convergence(d)
  local domain = { -0.5, (d.rounds or 0) + 0.5 }
  local x = { field = "x", type = "quantitative", title = "round", scale = { domain = domain, nice = false },
    axis = { tickMinStep = 1, format = "d" } }
  local times = {}
  for _, b in ipairs(d.best) do times[#times + 1] = b.time_ms end
  for _, a in ipairs(d.attempts) do times[#times + 1] = a.time_ms end
  for _, l in ipairs(d.lines) do times[#times + 1] = l.time_ms end
  local y = { field = "time_ms", type = "quantitative", title = "time (ms, median)", scale = time_scale(times) }
  local names, line_colors = {}, { eager = "#444444", ["torch.compile"] = "#2a9d8f",
    ["compile max-autotune"] = "#8ab17d", ["speed of light"] = "#d62828", ["best, re-measured"] = "#1f4e9c" }
  local range = {}
  -- the legend names each line with its value (label), coloured by what it is (name)
  for i, l in ipairs(d.lines) do names[i] = l.label or l.name; range[i] = line_colors[l.name] or "#999999" end
  local layers = {
    { data = { values = arr(d.attempts) }, mark = { type = "point", filled = true, size = 70, opacity = 0.85 },
      encoding = { x = x, y = y,
        color = { field = "outcome", type = "nominal", title = "attempt", scale = { domain = M.OUTCOMES, range = M.COLORS } },
        tooltip = { { field = "id", title = "attempt" }, { field = "outcome" }, { field = "time_ms", format = ".4f", title = "ms" },
          { field = "spread", title = "p10-p90" }, { field = "parent" }, { field = "skill" } } } },
    { data = { values = arr(d.best) }, mark = { type = "line", point = { filled = true, size = 50 }, color = "#1f4e9c",
      strokeWidth = 2 },
      encoding = { x = { field = "round", type = "quantitative" }, y = { field = "time_ms", type = "quantitative" },
        tooltip = { { field = "round" }, { field = "id", title = "best" }, { field = "time_ms", format = ".4f", title = "best ms" } } } },
  }
  if #d.lines > 0 then
    layers[#layers + 1] = { data = { values = d.lines }, mark = { type = "rule", strokeDash = { 6, 4 }, strokeWidth = 1.5 },
      encoding = { y = { field = "time_ms", type = "quantitative" },
        color = { field = d.lines[1].label and "label" or "name", type = "nominal", title = "reference",
          scale = { domain = names, range = range } },
        tooltip = { { field = "name" }, { field = "time_ms", format = ".4f", title = "ms" } } } }
  end
  local top = { width = WIDTH, height = 320, layer = layers, resolve = { scale = { color = "independent" } } }
  local spec = { ["$schema"] = VL, vconcat = { top }, config = { legend = { orient = "right" } } }
  if #d.failed > 0 then
    spec.vconcat[2] = { width = WIDTH, height = { step = 22 }, title = { text = "failed attempts (no time)", fontSize = 12 },
      data = { values = d.failed }, mark = { type = "point", shape = "cross", filled = true, size = 90, color = "#c93030" },
      encoding = { x = x, y = { field = "stage", type = "nominal", title = "failed at" },
        tooltip = { { field = "id", title = "attempt" }, { field = "stage" }, { field = "error" } } } }
  end
  return spec
end

-- lineage(nodes) -> the beam's lineage as a tree (Vega): nodes {id, parent, outcome,
-- label, tip, best}; the input is the root, each attempt hangs under the kernel it started from.
function M.lineage(nodes)
  local leaves = 0
  local has_child = {}
  for _, n in ipairs(nodes) do if n.parent then has_child[n.parent] = true end end
  for _, n in ipairs(nodes) do if not has_child[n.id] then leaves = leaves + 1 end end
  local height = math.max(80, leaves * 22)
  return {
    ["$schema"] = VG, width = WIDTH, height = height, padding = 5,
    data = {
      { name = "tree", values = nodes, transform = {
        { type = "stratify", key = "id", parentKey = "parent" },
        { type = "tree", method = "tidy", size = { { signal = "height" }, { signal = "width - 150" } },
          as = { "y", "x", "depth", "children" } } } },
      { name = "links", source = "tree", transform = { { type = "treelinks" },
        { type = "linkpath", orient = "horizontal", shape = "diagonal" } } },
    },
    scales = { { name = "color", type = "ordinal", domain = M.OUTCOMES, range = M.COLORS } },
    legends = { { fill = "color", title = "outcome", orient = "right" } },
    marks = {
      { type = "path", from = { data = "links" }, encode = { update = { path = { field = "path" }, stroke = { value = "#b8b8b8" } } } },
      { type = "symbol", from = { data = "tree" }, encode = {
        enter = { size = { value = 110 } },
        update = { x = { field = "x" }, y = { field = "y" }, fill = { scale = "color", field = "outcome" },
          stroke = { signal = "datum.best ? '#000' : '#fff'" }, strokeWidth = { signal = "datum.best ? 2.5 : 1" },
          tooltip = { signal = "datum.tip" } } } },
      { type = "text", from = { data = "tree" }, encode = {
        enter = { text = { field = "label" }, fontSize = { value = 10 }, baseline = { value = "middle" } },
        update = { x = { field = "x" }, y = { field = "y" }, dx = { value = 9 } } } },
    },
  }
end

-- roofline(points, roof) -> where the input and best kernels sit against the GPU's limits.
-- points: {{kernel, time_ms}}; roof: {bytes, flops, peak_bytes_per_s, peak_flops_per_s}. With a
-- FLOP count and a compute peak: the roofline (log-log, attained GFLOP/s over arithmetic
-- intensity); without (a data-movement op): attained bandwidth against the copy bandwidth.
function M.roofline(points, roof)
  if roof.flops and roof.flops > 0 and roof.peak_flops_per_s and roof.peak_bytes_per_s then
    local ai = roof.flops / roof.bytes
    local bw, peak = roof.peak_bytes_per_s / 1e9, roof.peak_flops_per_s / 1e9
    local ridge = peak / bw
    local lo, hi = math.min(ai, ridge) / 10, math.max(ai, ridge) * 10
    local roofline = { { ai = lo, gflops = bw * lo }, { ai = ridge, gflops = peak }, { ai = hi, gflops = peak } }
    local pts = {}
    for i, p in ipairs(points) do
      pts[i] = { kernel = p.kernel, ai = ai, gflops = roof.flops / (p.time_ms * 1e-3) / 1e9, time_ms = p.time_ms }
    end
    local xs = { field = "ai", type = "quantitative", title = "arithmetic intensity (FLOP per compulsory byte)", scale = { type = "log" } }
    return { ["$schema"] = VL, width = 520, height = 300, layer = {
      { data = { values = roofline }, mark = { type = "line", color = "#555" },
        encoding = { x = xs, y = { field = "gflops", type = "quantitative", title = "attained GFLOP/s", scale = { type = "log" } } } },
      { data = { values = pts }, mark = { type = "point", filled = true, size = 120 },
        encoding = { x = { field = "ai", type = "quantitative" }, y = { field = "gflops", type = "quantitative" },
          color = { field = "kernel", type = "nominal", title = "kernel" },
          tooltip = { { field = "kernel" }, { field = "gflops", format = ".1f", title = "GFLOP/s" }, { field = "time_ms", format = ".4f" } } } },
    } }
  end
  local peak = roof.peak_bytes_per_s and roof.peak_bytes_per_s / 1e9
  local bars = {}
  for i, p in ipairs(points) do
    bars[i] = { kernel = p.kernel, gbs = roof.bytes / (p.time_ms * 1e-3) / 1e9, time_ms = p.time_ms }
  end
  local layers = { { data = { values = bars }, mark = { type = "bar", width = { band = 0.6 } },
    encoding = { x = { field = "kernel", type = "nominal", title = json.null, sort = json.null },
      y = { field = "gbs", type = "quantitative", title = "attained bandwidth (GB/s of compulsory traffic)" },
      color = { field = "kernel", type = "nominal", legend = json.null },
      tooltip = { { field = "kernel" }, { field = "gbs", format = ".1f", title = "GB/s" }, { field = "time_ms", format = ".4f" } } } } }
  if peak then
    layers[2] = { data = { values = { { peak = peak, label = string.format("copy bandwidth %.0f GB/s", peak) } } },
      mark = { type = "rule", color = "#d62828", strokeDash = { 6, 4 } }, encoding = { y = { field = "peak", type = "quantitative" },
        tooltip = { { field = "label" } } } }
  end
  return { ["$schema"] = VL, width = 360, height = 260, layer = layers }
end

-- tokens_by_role(rows) -> stacked bars of tokens per role. rows: calls.by_role's entries.
function M.tokens_by_role(rows)
  local values = {}
  for _, r in ipairs(rows) do
    for _, k in ipairs({ "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens" }) do
      values[#values + 1] = { role = r.role, kind = k:gsub("_tokens", ""):gsub("_", " "), tokens = r[k] }
    end
  end
  return { ["$schema"] = VL, width = 520, height = { step = 24 }, data = { values = arr(values) }, mark = "bar",
    encoding = { y = { field = "role", type = "nominal", title = nil }, x = { field = "tokens", type = "quantitative", stack = true },
      color = { field = "kind", type = "nominal", title = "tokens", scale = { domain = { "input", "output", "cache read", "cache write" } } },
      tooltip = { { field = "role" }, { field = "kind" }, { field = "tokens", format = "," } } } }
end

-- speedups(rows) -> grouped bars: each problem's speedup against each baseline, with a rule at
-- 1x. rows: {{problem, baseline, speedup}}.
function M.speedups(rows, title)
  return { ["$schema"] = VL, width = { step = 36 }, height = 240, title = title,
    layer = {
      { data = { values = arr(rows) }, mark = "bar",
        encoding = { x = { field = "problem", type = "nominal", title = json.null, axis = { labelAngle = -30 } },
          xOffset = { field = "baseline", type = "nominal" }, y = { field = "speedup", type = "quantitative", title = "speedup (x)" },
          color = { field = "baseline", type = "nominal", title = "against" },
          tooltip = { { field = "problem" }, { field = "baseline" }, { field = "speedup", format = ".3f" } } } },
      { data = { values = { { one = 1 } } }, mark = { type = "rule", strokeDash = { 4, 3 }, color = "#333" },
        encoding = { y = { field = "one", type = "quantitative" } } },
    } }
end

-- metric_bars(rows, title, format) -> one bar per policy for one figure. rows: {{policy, value}};
-- format: a d3 format (".0%" for a share: the axis then runs from 0 to 100%).
function M.metric_bars(rows, title, format)
  local share = format == ".0%"
  return { ["$schema"] = VL, width = { step = 60 }, height = 180, title = title, data = { values = arr(rows) },
    mark = "bar", encoding = { x = { field = "policy", type = "nominal", title = json.null, sort = json.null },
      y = { field = "value", type = "quantitative", title = title, axis = { format = format or ".3~f" },
        scale = share and { domain = { 0, 1 } } or nil },
      color = { field = "policy", type = "nominal", legend = json.null },
      tooltip = { { field = "policy" }, { field = "value", format = format or ".3f", title = title } } } }
end

return M
