-- The own-kernel share of the GPU time and the library kernels by name in agents/bench.lua's table
-- and a sweep's table.md and sweep.json (agents/lib/own_share.lua): a figure carried by cuBLAS is
-- marked and its library kernels named under the table; an unknown share shows "?" with its
-- reason. Built from crafted run folders; the bench's evaluator is a FAKE pool that answers with
-- crafted verdicts (the real CPU path is in bench_cpu_spec.lua).
local fs, json = kagent.fs, kagent.json
local targets = require("agents.tools.bench.targets")
local measure = require("agents.tools.bench.measure")
local output = require("agents.tools.bench.output")
local report = require("agents.tools.sweep.report")
local plan_lib = require("agents.tools.sweep.plan")
local calls = require("agents.run.calls")

local GEMM = "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32"
local CPU_WHY = "CPU mode: no GPU kernels are profiled"

-- run_folder(dir, summary): a finished run's folder as agents write it
local function run_folder(dir, summary)
  fs.mkdir_p(dir)
  for _, f in ipairs({ "problem.py", "input_kernel.py", "best_kernel.py" }) do
    assert(fs.write(dir .. "/" .. f, "# " .. f .. "\n"))
  end
  summary.run_id = fs.basename(dir)
  assert(fs.write(dir .. "/summary.json", json.encode(summary)))
end

-- FakePool: answers benchmark jobs with a crafted verdict per kernel file, like the evaluator's
local function fake_pool(verdicts)
  return { benchmark = function(_, job) return verdicts[fs.basename(job.candidate)] end }
end

local function verdict(ms, extra)
  local r = { ok = true, stage = "done", time_ms = { median = ms, p10 = ms * 0.9, p90 = ms * 1.1, n = 10 },
    eager_ms = 2.0, baseline_times = { eager = { median = 2.0, p10 = 1.9, p90 = 2.1, n = 10 } }, device = "cuda:0" }
  for k, v in pairs(extra) do r[k] = v end
  return r
end

local function summary(extra)
  local s = { status = "done", verified = true, confirmed = true, best_ms = 1.0, input_ms = 1.5, speedup_vs_input = 1.5,
    speedup_vs_eager = 2.0, baselines = { eager_ms = 2.0, source = "measured" }, tokens = { total = 0 }, dtype = "fp32" }
  for k, v in pairs(extra) do s[k] = v end
  return s
end

describe("the own share in agents/bench.lua's table", function()
  it("shows the optimized kernel's share, marks one carried by library kernels and names them", function()
    local dir = spec.tmpdir("own-share-bench")
    run_folder(dir .. "/gemm_20261201-100000_0001", summary({ own_share = 0.21, library_kernels = { GEMM } }))
    run_folder(dir .. "/softmax_20261201-100000_0002", summary({ own_share_unknown = "CPU mode" }))
    local list = assert(targets.find(dir))
    targets.distinct(list)  -- names the rows, as agents/bench.lua does
    expect.eq(#list, 2)
    local answers = {
      { ["best_kernel.py"] = verdict(1.0, { own_share = 0.21, library_kernels = { GEMM } }),
        ["input_kernel.py"] = verdict(1.5, { own_share = 1.0, library_kernels = {} }) },
      { ["best_kernel.py"] = verdict(1.0, { own_share_unknown = CPU_WHY, library_kernels = {} }),
        ["input_kernel.py"] = verdict(1.5, { own_share_unknown = CPU_WHY, library_kernels = {} }) },
    }
    local rows = {}
    for i, t in ipairs(list) do
      rows[i] = measure.measure(fake_pool(answers[i]), t, { dtype = "fp32", baselines = { "eager" }, compare = false })
    end
    expect.eq(rows[1].own_share, 0.21)
    expect.same(rows[1].library_kernels, { GEMM })
    expect.eq(rows[1].own_share_unknown, nil)
    expect.eq(rows[2].own_share, nil)
    expect.eq(rows[2].own_share_unknown, CPU_WHY, "the reason, in the JSON")

    local text = output.table_text(rows, { dtype = "fp32", device = "H100", markdown = true, baselines = { "eager" } })
    expect.match(text, "| correct input, opt +| own +|\n", "the column:\n" .. text)
    expect.match(text, "| yes, yes +| 0%.21%* |\n", "the share, marked:\n" .. text)
    expect.match(text, "| yes, yes +| %? +|\n", "unknown: ?\n" .. text)
    expect.match(text, "\n%- row 1 %(gemm_20261201%-100000_0001%): 79%% of the GPU time in library kernels: " .. GEMM, text)
    expect.match(text, "\n%- own %? for row 2 %(softmax_20261201%-100000_0002%): " .. CPU_WHY, text)
    expect.match(text, "\n%- %* own share under 0%.5: the row's figure is carried by library kernels", text)

    local back = json.decode(json.encode(output.json_rows(rows, { "eager" })))
    expect.eq(back[1].own_share, 0.21)
    expect.same(back[1].library_kernels, { GEMM })
    expect.eq(back[2].own_share_unknown, CPU_WHY)
    expect.eq(json.encode(back[2].library_kernels), "[]", "an empty list, not an object")
    local csv_path = dir .. "/out.csv"
    assert(fs.write(csv_path, output.csv_text(rows, { "eager" })))
    local csv = calls.read_csv(csv_path)
    expect.eq(tonumber(csv[1].own_share), 0.21)
    expect.eq(csv[1].library_kernels, GEMM)
    expect.eq(csv[2].own_share_unknown, CPU_WHY)
  end)

  it("says why where the optimized kernel was not run", function()
    local dir = spec.tmpdir("own-share-bench-notrun")
    run_folder(dir .. "/r_20261201-100000_0001", summary({}))
    local t = assert(targets.find(dir))[1]
    local row = measure.row(t, { tries = {}, optimized = { ok = false, not_run = true, stage = "load", error = measure.TRITON_ON_CPU } },
      { dtype = "fp32", baselines = { "eager" } })
    expect.eq(row.own_share_unknown, "not run: " .. measure.TRITON_ON_CPU)
  end)
end)

describe("the own share in a sweep's table", function()
  it("reads each run's summary.json into sweep.json's rows and table.md, marked under 0.5", function()
    local dir = spec.tmpdir("own-share-sweep")
    local plan = { dir = dir, policy = "beam", problems = { { name = "gemm" }, { name = "softmax" }, { name = "old" } } }
    run_folder(dir .. "/runs/gemm/gemm_20261201-100000_0001", summary({ own_share = 0.21, library_kernels = { GEMM } }))
    run_folder(dir .. "/runs/softmax/softmax_20261201-100000_0002", summary({ own_share_unknown = "CPU mode" }))
    run_folder(dir .. "/runs/old/old_20261201-100000_0003", summary({}))
    local rows, agg = report.results(plan, { wall_s = 1 })
    report.write(plan, rows, agg)
    local saved = json.decode(assert(fs.read(plan_lib.path(dir))))
    expect.eq(saved.results[1].own_share, 0.21)
    expect.same(saved.results[1].library_kernels, { GEMM })
    expect.eq(saved.results[2].own_share_unknown, "CPU mode")
    expect.match(saved.results[3].own_share_unknown, "from before it recorded the share")
    expect.match(saved.definitions.own, "library kernels")
    local text = assert(fs.read(dir .. "/table.md"))
    expect.match(text, "| x input | own | rounds |", "the column:\n" .. text)
    expect.match(text, "| 1%.50 | 0%.21%* |", text)
    expect.match(text, "| 1%.50 | %? |", text)
    expect.match(text, "\n%- gemm: 79%% of the GPU time in library kernels: " .. GEMM, text)
    expect.match(text, "\n%- own %? for softmax: CPU mode", text)
    expect.match(text, "\n%- %* own share under 0%.5: the row's figure is carried by library kernels", text)
  end)
end)
