-- The figures the tools write, without Python: a sweep's aggregates as compare.lua reads them
-- (agents/tools/sweep/figures.lua, agents/tools/compare/results.lua), and bench.lua's outputs
-- (agents/tools/bench/measure.lua and output.lua) from FAKE evaluations.
local json = kagent.json
local figures = require("agents.tools.sweep.figures")
local output = require("agents.tools.bench.output")
local measure = require("agents.tools.bench.measure")
local compare_results = require("agents.tools.compare.results")

describe("sweep figures for comparisons", function()
  it("count attempts to the best over correct problems and the replay's answers", function()
    local rows = {
      figures.row({ name = "a" }, { verified = true, attempts_to_best = 4, replay = { hits = 3, misses = 0, sent = 0, calls = 3 } }, { status = "done" }),
      figures.row({ name = "b" }, { verified = true, attempts_to_best = 8, replay = { hits = 1, misses = 2, sent = 0, calls = 3 } }, { status = "done" }),
      figures.row({ name = "c" }, { verified = false, attempts_to_best = 1 }, { status = "done" }),
    }
    local agg = figures.aggregate(rows)
    expect.eq(agg.attempts_to_best.n, 2, "correct problems only")
    expect.eq(agg.attempts_to_best.median, 6)
    expect.same(agg.replay, { calls = 6, hits = 4, misses = 2, sent = 0 })
    local r = compare_results.policy_result("beam", { aggregate = agg, results = rows }, "/x")
    expect.eq(r.figures.attempts_to_best, 6)
    expect.near(r.figures.correctness_rate, 2 / 3, 1e-12)
    expect.match(compare_results.table_text({ r }, { problems = 3, llm = "replayed" }), "| beam | 67%% |")
  end)
end)

describe("bench.lua outputs", function()
  local function row(name, opt)
    local r = measure.row({ name = name, dir = "/p/" .. name }, {
      tries = { optimized = 1, input_kernel = 1 },
      optimized = opt and { ok = true, time_ms = { median = 1.0, p10 = 0.9, p90 = 1.1 }, eager_ms = 4.0,
        baseline_times = { eager = { median = 4.0, p10 = 3.9, p90 = 4.2 } }, do_bench = { eager = 4.1 },
        baseline_errors = { compile = "ENOTSUP: no torch.compile" }, roofline = { sol_pct = 50, lower_bound_ms = 0.5 } }
        or { ok = false, stage = "correctness", error = "EMISMATCH: wrong" },
      input_kernel = { ok = true, time_ms = { median = 2.0, p10 = 1.9, p90 = 2.2 }, eager_ms = 4.0 },
      compare = opt and { ok = true, candidates = { {}, { speedup = { median = 2.05, p10 = 1.9, p90 = 2.2, cv = 0.03, pairs = 4 } } } },
    }, { dtype = "bf16", baselines = { "eager", "compile" }, skipped = { compile_max_autotune = "needs a GPU" } })
    return r
  end

  it("give benchmark.py's keys (null when unmeasured), spreads, speedups and the reasons for gaps", function()
    local ok, bad = row("01_ok", true), row("02_bad", false)
    expect.eq(ok.eager_ms, 4.0)
    expect.near(ok.speedup.optimized_vs_eager, 4.0, 1e-12)
    expect.near(ok.speedup.optimized_vs_input, 2.0, 1e-12)
    expect.eq(ok.interleaved.optimized_vs_input, 2.05)
    expect.eq(ok.do_bench_ms.eager, 4.1)
    expect.near(ok.sol_pct.eager, 0.5 / 4.0 * 100, 1e-9)
    expect.eq(ok.errors.compile, "ENOTSUP: no torch.compile")
    expect.eq(ok.errors.compile_max_autotune, "needs a GPU")
    expect.eq(bad.correct.optimized, false)
    expect.match(bad.errors.optimized, "^correctness: EMISMATCH")
    -- the baselines a FAKE evaluator's ready line names (`baselines`), as agents/bench.lua passes them
    local names = { "eager", "compile", "compile_max_autotune" }
    local j = output.json_rows({ ok, bad }, names)
    for _, k in ipairs(output.KA_KEYS) do expect.truthy(j[2][k] ~= nil, "key " .. k .. " present") end
    expect.eq(j[2].optimized_ms, json.null)
    expect.eq(j[2].eager_ms, 4.0, "eager came with the input kernel's job")
    expect.eq(j[2].compile_max_autotune_ms, json.null, "every baseline the evaluator names is a key")
    local text = output.table_text({ ok, bad }, { dtype = "bf16", device = "FAKE", markdown = true, baselines = names })
    expect.match(text, "| problem +| eager +| compile +| input +| optimized +|", "benchmark.py's four columns first")
    expect.match(text, "| 01_ok +| 4%.0000 | %- +| 2%.0000 | 1%.0000 +|")
    expect.match(text, "02_bad, optimized: correctness: EMISMATCH")
    expect.falsy(text:find("hardened re-measure", 1, true), "a figure timed as the baselines has no method note")
    -- a figure the evaluator's hardened re-measure gave (its first timing raised a flag) is named
    local h = measure.row({ name = "03_hard", dir = "/p/03_hard" }, { tries = { optimized = 1 },
      optimized = { ok = true, time_ms = { median = 1.0, p10 = 0.9, p90 = 1.1, hardened = true }, eager_ms = 4.0 } },
      { dtype = "fp32", baselines = { "eager" } })
    expect.match(output.table_text({ h }, { device = "cpu", markdown = true, baselines = names }),
      "03_hard, optimized: timed by the evaluator's hardened re%-measure %(new inputs before every call%)")
    -- Markdown and the terminal's plain columns: every line of a table as wide as its header,
    -- each column starting where its header does
    local plain = output.table_text({ ok, bad }, { dtype = "bf16", device = "FAKE", baselines = names })
    expect.falsy(plain:find("|", 1, true), "no pipes on a terminal")
    for _, t in ipairs({ text, plain }) do
      local head = t:match("\n([^\n]*problem[^\n]*)")
      local col = head:find("optimized", 1, true)
      for l in t:gmatch("[^\n]+") do
        if l:find("^|? ?01_ok") or l:find("^|? ?02_bad") then
          expect.truthy(l:sub(col - 1, col - 1):match("[ |]"), "aligned: " .. l)
        end
      end
    end
    -- a note that holds for every problem is one line
    local cpu_row = function(name)
      return { problem = name, errors = { eager = "not reported: neither verified", compile = "not reported: neither verified" },
        correct = {}, speedup = {}, sol_pct = {}, spread = {}, do_bench_ms = {} }
    end
    local many = output.table_text({ cpu_row("a"), cpu_row("b"), cpu_row("c") }, { device = "cpu", markdown = true,
      baselines = names })
    local _, n = many:gsub("not reported", "")
    expect.eq(n, 1, many)
    expect.match(many, "every problem %(3%), compile and eager: not reported")
    local csv = output.csv_text({ ok, bad }, names)
    local header = csv:match("^[^\n]+")
    expect.eq(header, "problem,dtype,device,eager_ms,compile_ms,input_kernel_ms,optimized_ms,compile_max_autotune_ms,"
      .. "eager_p10,eager_p90,compile_p10,compile_p90,input_kernel_p10,input_kernel_p90,optimized_p10,optimized_p90,"
      .. "compile_max_autotune_p10,compile_max_autotune_p90,do_bench_eager_ms,do_bench_compile_ms,"
      .. "do_bench_compile_max_autotune_ms,optimized_vs_eager,optimized_vs_compile,optimized_vs_compile_max_autotune,"
      .. "optimized_vs_input,interleaved_optimized_vs_input,interleaved_p10,interleaved_p90,interleaved_cv,"
      .. "sol_pct_input_kernel,sol_pct_optimized,lower_bound_ms,correct_input_kernel,correct_optimized,own_share,own_share_unknown,library_kernels,errors")
    local _, lines = csv:gsub("\n", "")
    expect.eq(lines, 3)
    -- the columns are the evaluator's baselines, not a list of the agents' own: a baseline only
    -- the (FAKE) ready line names gets its columns, one it does not name gets none
    local other = { "eager", "compile", "planted_baseline" }
    local t2 = output.table_text({ ok }, { dtype = "fp32", device = "FAKE", markdown = true, baselines = other })
    expect.match(t2, "| optimized +| planted%-baseline +| opt vs eager")
    expect.match(t2, "| do_bench planted%-baseline +|")
    expect.falsy(t2:find("max-autotune", 1, true), "a baseline the evaluator does not name has no column")
    local h2 = output.csv_text({ ok }, other):match("^[^\n]+")
    expect.truthy(h2:find(",planted_baseline_ms,", 1, true) and h2:find(",optimized_vs_planted_baseline,", 1, true), h2)
    expect.falsy(h2:find("max_autotune", 1, true), h2)
    expect.eq(output.json_rows({ bad }, other)[1].planted_baseline_ms, json.null)
  end)
end)

