-- The reports without Python: report.html of a FAKE run folder
-- (tests/fixtures/report/synthetic_run.lua), the index pages, an old unconfirmed summary, and
-- agents/report.lua's exit codes. The replay keys and usage.csv are in replay_keys_spec.lua, the
-- sweep figures and bench.lua's outputs in report_figures_spec.lua.
package.path = kagent.root .. "/tests/fixtures/report/?.lua;" .. package.path
local fs, json = kagent.fs, kagent.json
local synthetic = require("synthetic_run")
local run_data = require("agents.tools.report.run_data")
local run_page = require("agents.tools.report.run_page")
local index_page = require("agents.tools.report.index_page")
local html = require("agents.tools.report.html")

-- spec_data(page, id) -> the decoded JSON of <script type="application/json" id=id>
local function spec_data(page, id)
  local text = page:match('<script type="application/json" id="' .. id:gsub("%-", "%%-") .. '">(.-)</script>')
  return text and json.decode((text:gsub("\\u003c", "<")))
end

describe("report.html", function()
  it("says whether the best works beyond the problem's shapes, and what it was chosen over", function()
    local dir = synthetic.write(spec.tmpdir("report-shapes") .. "/run")
    local s = json.decode(fs.read(dir .. "/summary.json"))
    s.generalizes, s.preferred_general = "yes", { id = "r2w1", over = "r1w2", reason = "fake" }
    fs.write(dir .. "/summary.json", json.encode(s))
    local page = assert(fs.read(assert(run_page.write(dir))))
    expect.truthy(page:find("other shapes</div><div>verified on the problem resized; chosen over r1w2, as fast within noise, which does not", 1, true),
      "the shapes line of a best chosen for generalizing")
    s.generalizes, s.preferred_general = "no", nil
    s.generalization = { { sizes = { batch_size = 7 }, reason = "fake: wrong at batch 7" } }
    fs.write(dir .. "/summary.json", json.encode(s))
    page = assert(fs.read(assert(run_page.write(dir))))
    expect.truthy(page:find('other shapes</div><div><span class="err">only at the problem\'s shapes: fails at batch_size=7 (fake: wrong at batch 7)', 1, true),
      "the shapes line of a best that does not generalize")
  end)

  it("shows every attempt by outcome, failures without a time, the lineage, the tables and the diff", function()
    local dir = synthetic.write(spec.tmpdir("report") .. "/run")
    local path = assert(run_page.write(dir))
    local page = assert(fs.read(path))
    -- self-contained: the libraries are inline, nothing is loaded from elsewhere
    expect.falsy(page:find("<script[^>]+src=") or page:find("<link[^>]+href="), "no external script or stylesheet")
    expect.falsy(page:find("sourceMappingURL", 1, true), "no source map to fetch")
    for _, lib in ipairs({ "vega.min.js", "vega-lite.min.js", "diff.min.js", "diff2html-ui-slim.min.js" }) do
      expect.truthy(page:find(html.asset(lib):sub(200, 260), 1, true), lib .. " inlined")
    end
    local conv = assert(spec_data(page, "spec-convergence"), "convergence spec")
    local layers = conv.vconcat[1].layer
    local timed = layers[1].data.values
    local outcomes = {}
    for _, p in ipairs(timed) do outcomes[p.outcome] = (outcomes[p.outcome] or 0) + 1 end
    expect.same(outcomes, { duplicate = 1, improved = 2, same = 1, slower = 1 }, "timed attempts by outcome")
    local failed = conv.vconcat[2].data.values
    expect.eq(#failed, 3, "three failed attempts")
    local stages = {}
    for _, f in ipairs(failed) do
      stages[#stages + 1] = f.stage
      expect.eq(f.time_ms, nil, "a failed attempt has no time: " .. f.id)
    end
    table.sort(stages)
    expect.same(stages, { "correctness", "replay", "timing" })
    -- best per round: the input, then the head of the beam after each round
    local best = layers[2].data.values
    expect.same({ best[1].time_ms, best[2].time_ms, best[3].time_ms, best[4].time_ms }, { 3.5, 2.0, 1.6, 1.6 })
    local names = {}
    for _, l in ipairs(layers[3].data.values) do names[#names + 1] = l.name end
    expect.same(names, { "eager", "torch.compile", "compile max-autotune", "speed of light", "best, re-measured" })
    -- the lineage: a tree rooted at the input, each attempt under the kernel it started from
    local tree = assert(spec_data(page, "spec-lineage"), "lineage spec").data[1].values
    local by_id = {}
    for _, n in ipairs(tree) do by_id[n.id] = n end
    expect.eq(#tree, #synthetic.ATTEMPTS + 1)
    expect.eq(by_id.input.parent, nil, "the input is the root")
    expect.eq(by_id.r3w1.parent, "r2w1")
    expect.eq(by_id.r2w1.best, true, "the best kernel is marked")
    for _, n in ipairs(tree) do if n.parent then expect.truthy(by_id[n.parent], n.id .. "'s parent is a node") end end
    -- roofline position with the FLOP count: both kernels at the problem's intensity
    local roof = assert(spec_data(page, "spec-roofline"), "roofline spec")
    local pts = roof.layer[2].data.values
    expect.eq(#pts, 2)
    expect.near(pts[1].ai, 0.5, 1e-9, "2 GFLOP over 4 GB")
    expect.near(pts[2].gflops, 2e9 / 1.62e-3 / 1e9, 1e-6)
    -- tables: one row per attempt; key metrics side by side; tokens per role from usage.csv
    local _, rows = page:match('<table class="data" id="rounds">(.-)</thead><tbody>(.-)</tbody>')
    local n = 0
    for _ in rows:gmatch("<tr") do n = n + 1 end
    expect.eq(n, #synthetic.ATTEMPTS)
    expect.truthy(rows:find("failed at timing", 1, true) and rows:find("duplicate of r2w1", 1, true))
    expect.truthy(rows:find('<span title="1.6000 ms vs 1.6000 ms: inside 1% or the spreads">same</span>', 1, true),
      "the promotion gate's reason on the outcome")
    expect.truthy(page:find("DRAM bandwidth (% of peak)", 1, true), "counters side by side")
    local d = run_data.load(dir)
    local roles = {}
    for _, r in ipairs(d.by_role) do roles[r.role] = r end
    expect.eq(roles.optimize.calls, 2)
    expect.eq(roles.optimize.tokens, 800 + 300 + 3000 + 700 + 100 + 3000)
    expect.near(roles.diagnose.cost_usd, 0.01, 1e-12)
    local diff = assert(spec_data(page, "diff-data"), "diff data")
    expect.eq(diff.new_text, synthetic.BEST_CODE)
    expect.truthy(page:find("4 hit(s), 1 miss(es)", 1, true), "replay hits and misses")
  end)

  it("holds one method in Input vs best: the confirmation's figures, as the header's speedups", function()
    local dir = synthetic.write(spec.tmpdir("report-method") .. "/run")
    local s = json.decode(fs.read(dir .. "/summary.json"))
    -- the search timed the input at 3.5 ms at the start (input_eval.json); the confirmation
    -- re-timed it at 3.3 beside the best's 1.62, and the header's speedups use those
    s.input_ms, s.input_time = 3.3, { median = 3.3, p10 = 3.25, p90 = 3.4 }
    s.best_time = { median = 1.62, p10 = 1.6, p90 = 1.65 }
    s.speedup_vs_input = 3.3 / 1.62
    fs.write(dir .. "/summary.json", json.encode(s))
    local d = run_data.load(dir)
    local side = {}
    for _, r in ipairs(d.side) do side[r.metric] = r end
    local t = side["time, median (ms)"]
    expect.near(t.input / t.best, s.speedup_vs_input, 1e-12, "the table's input/best is the header's x input")
    expect.near(side["speedup vs eager"].best, s.speedup_vs_eager, 1e-12, "the best's x eager is the header's")
    expect.near(side["speedup vs eager"].input, 4.0 / 3.3, 1e-12, "the input over the same eager")
    expect.eq(side["time, p10 (ms)"].input, 3.25, "the input's spread is the re-timing's")
    local page = assert(fs.read(assert(run_page.write(dir))))
    expect.truthy(page:find('id="metrics-method">Times and speedups: the final confirmation', 1, true), "the table says its method")
    -- an unconfirmed run has no figure there at all
    s.verified = false
    fs.write(dir .. "/summary.json", json.encode(s))
    for _, r in ipairs(run_data.load(dir).side) do
      expect.falsy(r.metric:find("time", 1, true) or r.metric:find("speedup", 1, true), "no figure of an unconfirmed run: " .. r.metric)
    end
  end)

  it("of a running run fills its header from the start and links only to files that exist", function()
    local dir = synthetic.write(spec.tmpdir("report-live") .. "/run")
    fs.remove(dir .. "/summary.json")
    fs.remove(dir .. "/best_kernel.py")
    local st = json.decode(fs.read(dir .. "/state.json"))
    -- what agents/search/state.lua saves: the status line's model, device, mode and the wall so far
    st.opts = { problem = "/problems/36_rmsnorm.py", policy = "beam", dtype = "bf16", rounds = 3 }
    st.live = { model = "openai:fake", device = "FAKE GPU", mode = "llm", wall_s = 42.5 }
    st.best = { id = "r2w1", round = 2, result = { ok = true, time_ms = { median = 1.6 } } }
    fs.write(dir .. "/state.json", json.encode(st))
    local page = assert(fs.read(assert(run_page.write(dir))))
    local function row(k) return page:match("<div>" .. k .. "</div><div>(.-)</div>") end
    expect.eq(row("model"), "openai:fake")
    expect.eq(row("device, dtype"), "FAKE GPU, bf16")
    expect.match(row("policy / mode"), " / llm$")
    expect.eq(row("best kernel"), "r2w1 (round 2): 1.6000 ms so far, as the search measured it (not confirmed yet)")
    expect.match(row("wall"), "^42%.5 s so far")
    local files = row("files")
    expect.falsy(files:find("summary.json", 1, true), "no link to summary.json before it is written: " .. files)
    expect.falsy(files:find("best_kernel.py", 1, true), "no link to best_kernel.py before it is written")
    expect.truthy(files:find('href="input_kernel.py"', 1, true), "the files that exist are linked")
    -- once written, linked
    fs.write(dir .. "/best_kernel.py", synthetic.BEST_CODE)
    page = assert(fs.read(assert(run_page.write(dir))))
    expect.truthy(row("files"):find('href="best_kernel.py"', 1, true), "best_kernel.py linked once it exists")
  end)

  it("names both sides of a diff alike, so no diff is tagged RENAMED", function()
    local dir = synthetic.write(spec.tmpdir("report-diff-name") .. "/run")
    fs.mkdir_p(dir .. "/rounds/round_1/w1")
    fs.write(dir .. "/rounds/round_1/w1/kernel.py", synthetic.BEST_CODE)  -- r1w1's kernel: its "diff vs input" link
    local page = assert(fs.read(assert(run_page.write(dir))))
    expect.truthy(page:find('class="diff-link"', 1, true), "an attempt's diff link")
    local diff = assert(spec_data(page, "diff-data"), "diff data")
    expect.eq(diff.name, run_page.DIFF_NAME, "one name for both kernels")
    expect.eq(diff.old_name, nil); expect.eq(diff.new_name, nil)
    -- every patch the page makes (the input vs best loader, an attempt's "diff vs" link) gets the one name twice
    local patches = 0
    for a, b in page:gmatch("Diff%.createTwoFilesPatch%(([^,]+),([^,]+),") do
      patches = patches + 1
      expect.eq(a, b, "the two file names of a patch: " .. a .. ", " .. b)
    end
    expect.eq(patches, 2, "the loader's patch and the attempts' patch")
  end)

  it("keeps page text out of the HTML parser's way", function()
    expect.eq(html.esc('<a href="x">&'), "&lt;a href=&quot;x&quot;&gt;&amp;")
    local el = html.json_data("d", { s = "</script><!-- x" })
    local _, closing = el:gsub("</script>", "")
    expect.eq(closing, 1, "only the element's own closing tag")
    expect.falsy(el:find("<!--", 1, true), "no comment opener")
    expect.eq(json.decode(el:match(">(.*)</script>"):gsub("\\u003c", "<")).s, "</script><!-- x")
  end)

  it("lists the runs of a folder, newest first, with links to their reports", function()
    local root = spec.tmpdir("report-index")
    synthetic.write(root .. "/a_20261101-100000_0001")
    synthetic.write(root .. "/b_20261102-100000_0002")
    fs.mkdir_p(root .. "/unfinished")
    assert(run_page.write(root .. "/b_20261102-100000_0002"))
    local page = fs.read(assert(index_page.write_runs(root)))
    local rows = index_page.runs(root)
    expect.eq(#rows, 2, "finished runs only")
    expect.eq(rows[1].name, "b_20261102-100000_0002", "newest first")
    expect.truthy(page:find('href="b_20261102-100000_0002/report.html"', 1, true), "a link to the report that exists")
    expect.falsy(page:find('href="a_20261101-100000_0001/report.html"', 1, true), "no link to a report not written")
    -- one method on the page: its chart holds the table's confirmed speedups, no search-time curve
    local pts = assert(spec_data(page, "spec-speedups"), "the speedups chart").layer[1].data.values
    local by = {}
    for _, p in ipairs(pts) do by[p.problem .. " " .. p.baseline] = p.speedup end
    for _, r in ipairs(rows) do
      expect.near(by[r.name .. " eager"], r.x_eager, 1e-12, "the chart's x eager is the table's")
      expect.near(by[r.name .. " input"], r.x_input, 1e-12, "the chart's x input is the table's")
    end
    expect.falsy(page:find("search-time medians", 1, true), "no search-time figure on the index")
  end)
end)

describe("a summary of an unconfirmed run written before such runs had no figures", function()
  it("shows no speedup on the run's page nor in the index", function()
    local report = require("agents.tools.report")
    local dir = spec.tmpdir("old-unconfirmed")
    local rd = dir .. "/runs/old_run_20261101-000000_abcd"
    fs.mkdir_p(rd)
    -- what a run whose final re-measure failed wrote before: verified false, search-time figures
    fs.write(rd .. "/summary.json", json.encode({ run_id = "old_run_20261101-000000_abcd", status = "done",
      problem = "p.py", policy = "beam", mode = "llm", dtype = "bf16", device = "cpu", verified = false,
      best_ms = 0.5, input_ms = 1.2, speedup_vs_input = 2.4, speedup_vs_eager = 2.4, speedup_vs_compile = 1.9,
      best = { id = "r1w1", round = 1 }, rounds = 1, attempts = 2 }))
    local page_path = assert(report.run_page(rd))
    local page = fs.read(page_path)
    expect.match(page, "not confirmed")
    expect.no_match(page, "2.400x")
    local index_path = assert(report.runs_index(dir .. "/runs"))
    local index = fs.read(index_path)
    expect.no_match(index, "2.400")
    expect.no_match(index, "1.900")
  end)
end)


describe("agents/report.lua", function()
  it("builds a run folder's pages (exit 0), and says which folder it was wrongly given or cannot read (exit 2)", function()
    local tmp = spec.tmpdir("report-cli")
    local dir = synthetic.write(tmp .. "/runs/run")
    local function report(...)
      return assert(kagent.proc.run({ kagent.exe, "--env-file", "/dev/null", kagent.root .. "/agents/report.lua", ... },
        { timeout = 60 }))
    end
    local r = report(dir)
    expect.eq(r.code, 0, r.stderr)
    expect.match(r.stdout, "report%.html")
    fs.mkdir_p(tmp .. "/empty")
    r = report(dir, tmp .. "/none", tmp .. "/empty")
    expect.eq(r.code, 2, r.stderr)
    expect.match(r.stderr, "/none: no such folder")
    expect.match(r.stderr, "/empty: neither a run folder")
    expect.match(r.stdout, "report%.html", "the good folder's pages are still written")
    -- a damaged record: one line naming it, no traceback
    fs.mkdir_p(tmp .. "/sweep")
    fs.write(tmp .. "/sweep/sweep.json", '{"problems": 5}')
    r = report(tmp .. "/sweep")
    expect.eq(r.code, 2, r.stderr)
    expect.match(r.stderr, "sweep%.json is not a sweep's record")
    expect.no_match(r.stderr, "traceback")
    kagent.proc.run({ "rm", "-rf", tmp })
  end)
end)
