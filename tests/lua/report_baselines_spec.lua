-- The index pages draw saved runs, where no evaluator is asked: their baselines are the names the
-- records saved (summary.json `baselines`, a sweep's rows and aggregate), never a list of the
-- agents' own; a record that names none gets agents/lib/baselines.lua's one fallback.
local fs = kagent.fs
local json = kagent.json
local index_page = require("agents.tools.report.index_page")
local baselines = require("agents.lib.baselines")
local figures = require("agents.tools.sweep.figures")
local fuse_rows = require("agents.tools.sweep.fuse_rows")

local function summary(dir, s)
  fs.mkdir_p(dir)
  assert(fs.write(dir .. "/summary.json", json.encode(s)))
end

-- th(page) -> the headers of the page's tables, as one string "|a|b|...|"
local function headers(page)
  local out = {}
  for h in page:gmatch("<th>(.-)</th>") do out[#out + 1] = h end
  return "|" .. table.concat(out, "|") .. "|"
end

describe("the index pages' baselines", function()
  it("are the ones the runs' summaries saved", function()
    local root = spec.tmpdir("report-baselines-runs")
    summary(root .. "/r_20261101-100000_0001", { status = "done", verified = true, best_ms = 1.0,
      speedup_vs_input = 1.5, speedup_vs_eager = 2.0, speedup_vs_planted = 3.0,
      baselines = { eager_ms = 2.0, planted_ms = 3.0, source = "measured" } })
    local page = fs.read(assert(index_page.write_runs(root)))
    local h = headers(page)
    expect.truthy(h:find("|x input|x eager|x planted|", 1, true), h)
    expect.falsy(h:find("x compile", 1, true), "no column for a baseline no run saved: " .. h)
    local rows, names = index_page.runs(root)
    expect.same(names, { "eager", "planted" })
    expect.eq(rows[1].x_planted, 3.0)
  end)

  it("of a sweep are those its rows and aggregate saved", function()
    local dir = spec.tmpdir("report-baselines-sweep")
    local plan = { policy = "beam", problems = { "p1" }, definitions = { fast_p = "a planted definition" },
      results = { { name = "p1", status = "done", verified = true, eager_ms = 2.0, planted_ms = 4.0,
        speedup = { eager = 2.0, planted = 4.0, input = 1.5 } } },
      aggregate = { problems = 1, correct = 1, fast_p = { eager = { ["1.0"] = 1 }, planted = { ["1.0"] = 1 } } } }
    assert(fs.write(dir .. "/sweep.json", json.encode(plan)))
    local page = fs.read(assert(index_page.write_sweep(dir)))
    local h = headers(page)
    expect.truthy(h:find("|eager ms|planted ms|x eager|x planted|x input|", 1, true), h)
    expect.falsy(h:find("compile", 1, true), h)
    expect.truthy(page:find("fast_1.0 / fast_1.2 vs planted", 1, true), "the aggregate's figures per saved baseline")
    expect.truthy(page:find("a planted definition", 1, true), "the definitions the sweep saved")
  end)

  it("of a run's page are the lines of the baselines its summary saved", function()
    local dir = spec.tmpdir("report-baselines-run") .. "/r_20261101-100000_0001"
    summary(dir, { status = "done", verified = true, best_ms = 1.0,
      baselines = { eager_ms = 2.0, compile_ms = 1.5, planted_ms = 3.0, source = "measured" } })
    local d = assert(require("agents.tools.report.run_data").load(dir))
    local names = {}
    for _, l in ipairs(d.lines) do names[#names + 1] = l.name end
    expect.same(names, { "eager", "torch.compile", "planted", "best, re-measured" })
  end)

  it("fall back to the one Lua list where the records name none", function()
    local root = spec.tmpdir("report-baselines-none")
    summary(root .. "/r_20261101-100000_0001", { status = "failed", error = "x" })
    local _, names = index_page.runs(root)
    expect.same(names, baselines.FALLBACK)
    expect.same(baselines.saved({ eager_ms = json.null, source = "measured" }, { input = 2 }), baselines.FALLBACK)
  end)
end)

describe("a sweep's tables' baselines", function()
  it("are those the runs' summaries list, measured or not", function()
    -- a FAKE summary whose evaluator reported eager, compile (not timed: null) and planted
    local summary_of = function(planted)
      return { status = "done", verified = true, best_ms = 1.0, input_ms = 1.5, speedup_vs_input = 1.5,
        speedup_vs_eager = 2.0, speedup_vs_planted = planted / 1.0, tokens = { total = 0 },
        baselines = { eager_ms = 2.0, compile_ms = json.null, planted_ms = planted, source = "measured" } }
    end
    local rows = { figures.row({ name = "p1" }, summary_of(3.0), { status = "done", launches = {} }),
      figures.row({ name = "p2" }, summary_of(0.5), { status = "done", launches = {} }) }
    expect.same(rows[1].baselines, { "eager", "compile", "planted" })
    expect.eq(rows[1].planted_ms, 3.0)
    expect.eq(rows[1].speedup.planted, 3.0)
    local agg = figures.aggregate(rows)
    expect.same(agg.baselines, { "eager", "compile", "planted" })
    expect.eq(agg.fast_p.planted["1.0"], 0.5, "one of two problems beats planted")
    expect.eq(agg.speedup.planted.n, 2)
    expect.eq(agg.baseline_missing.compile, 2, "listed, not timed: missing, never dropped")
    expect.eq(agg.fast_p.compile["1.0"], json.null, "no problem measured compile: no figure")
    local text = figures.table_text(rows, agg)
    expect.truthy(text:find("| best ms | eager ms | compile ms | planted ms | x eager | x compile | x planted | x input |", 1, true), text)
    expect.match(text, "fast_1%.0 vs planted 50%%")
    expect.match(text, "x planted: geomean")
    -- the baselines listed: every <name>_ms that is a number or null, not `source`, not `own`
    expect.same(baselines.listed({ planted_ms = json.null, eager_ms = 1, source = "x", time_ms = 2 }, "time_ms"),
      { "eager", "planted" })
    expect.same(baselines.listed({ source = "cached" }), baselines.FALLBACK)
  end)

  it("of a fuse sweep are the ones its first programs were timed beside", function()
    local function fuse_row(name, planted_ms)
      return { name = name, status = "done", fuse = fuse_rows.row({ mode = "fuse", subgraphs = { count = 1 },
        baselines = { eager_ms = 2.0, planted_ms = planted_ms or json.null },
        first_program = { verified = true, time_ms = 1.0, eager_ms = 2.0, planted_ms = planted_ms or json.null,
          compile_max_autotune_ms = 4.0 } }) }
    end
    local rows = { fuse_row("a", 3.0), fuse_row("b") }
    expect.eq(rows[1].fuse.first_speedup.planted, 3.0)
    local fagg = fuse_rows.aggregate(rows)
    expect.eq(fagg.first_speedup.planted.n, 1)
    expect.eq(fagg.first_fast_p.planted["1.0"], 0.5)
    expect.eq(fagg.first_fast_p.compile_max_autotune, nil, "fast_p only against the reported baselines")
    local text = fuse_rows.table_text(rows, fagg)
    expect.truthy(text:find("| first ms | eager ms | planted ms | x eager | x max-autotune | x planted | own time |", 1, true), text)
    expect.match(text, "x planted: geomean 3%.000 %(n=1%), fast_1%.0 50%%")
    expect.match(text, "%- b: planted: no figure and no reason recorded")
    expect.falsy(text:find("compile ms", 1, true), "no column for a baseline no record lists: " .. text)
  end)
end)
