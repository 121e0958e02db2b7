-- agents/bench.lua in CPU mode: problem folders in KernelAgent's artifact layout (a ModelNew and a
-- kernel_function candidate), a run folder, --json with benchmark.py's keys, --csv, --resume, and
-- KernelAgent's own Triton artifacts reported as needing a GPU. Needs a python with torch
-- (KAGENT_PYTHON).
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs, json = kagent.fs, kagent.json
local fake = require("fake_session")
local calls = require("agents.run.calls")

local function copy(from, to)
  fs.mkdir_p(fs.dirname(to))
  assert(fs.write(to, assert(fs.read(kagent.root .. "/" .. from))))
end

-- folders(dir): two problems in KernelAgent's layout and one run folder
local function folders(dir)
  copy("examples/problems/rmsnorm_small.py", dir .. "/ka/01_rmsnorm/problem.py")
  copy("examples/kernels/cpu/rmsnorm_small_chunked.py", dir .. "/ka/01_rmsnorm/input_kernel.py")
  copy("examples/kernels/cpu/rmsnorm_small_fast.py", dir .. "/ka/01_rmsnorm/optimized_kernel_beam_search.py")
  copy("tests/fixtures/eval/linear_problem.py", dir .. "/ka/02_linear/problem.py")
  copy("tests/fixtures/eval/linear_kernel_function.py", dir .. "/ka/02_linear/input_kernel.py")
  copy("tests/fixtures/eval/linear_modelnew.py", dir .. "/ka/02_linear/optimized_kernel_beam_search.py")
  copy("examples/problems/softmax.py", dir .. "/runs/softmax_20261123-120000_0001/problem.py")
  copy("examples/kernels/cpu/softmax.py", dir .. "/runs/softmax_20261123-120000_0001/input_kernel.py")
  copy("examples/kernels/cpu/softmax.py", dir .. "/runs/softmax_20261123-120000_0001/best_kernel.py")
  fs.write(dir .. "/runs/softmax_20261123-120000_0001/summary.json",
    json.encode({ run_id = "softmax_20261123-120000_0001", problem = "/x/softmax.py", dtype = "fp32" }))
end

local function by_problem(rows)
  local out = {}
  for _, r in ipairs(rows) do out[r.problem] = r end
  return out
end

describe("agents/bench.lua on the CPU", function()
  it("times eager, the input and the optimized kernel of each problem and writes benchmark.py's keys", function()
    if not fake.cpu().have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("bench")
    folders(dir)
    local r = fake.run_agent("bench.lua", { dir .. "/ka", dir .. "/runs/softmax_20261123-120000_0001", "--devices", "cpu",
      "--json", dir .. "/out.json", "--csv", dir .. "/out.csv" }, { KAGENT_PYTHON = spec.python }, 600)
    if r.code ~= 0 then error("bench.lua exited " .. r.code .. "\n" .. r.stderr:sub(-3000) .. r.stdout:sub(-2000)) end
    local rows = json.decode(assert(fs.read(dir .. "/out.json")))
    expect.eq(#rows, 3)
    expect.same({ rows[1].problem, rows[2].problem, rows[3].problem }, { "01_rmsnorm", "02_linear", "softmax" }, "in the order given")
    for _, row in ipairs(rows) do
      for _, k in ipairs({ "problem", "eager_ms", "compile_ms", "input_kernel_ms", "optimized_ms" }) do
        expect.truthy(row[k] ~= nil, row.problem .. " has benchmark.py's key " .. k)
      end
      expect.eq(row.correct.input_kernel, true, row.problem .. ": the input re-verified")
      expect.eq(row.correct.optimized, true, row.problem .. ": the optimized kernel re-verified")
      expect.truthy(type(row.eager_ms) == "number" and type(row.optimized_ms) == "number", row.problem .. " timed")
      expect.truthy(row.spread.optimized.p10 <= row.optimized_ms and row.optimized_ms <= row.spread.optimized.p90, "median inside p10..p90")
      expect.truthy(row.errors.compile_max_autotune:find("needs a GPU", 1, true), "max-autotune reported as needing a GPU")
      expect.truthy(row.errors.compile ~= nil or type(row.compile_ms) == "number", "torch.compile timed or its reason given")
      expect.eq(row.compile_max_autotune_ms, json.null)
      -- no GPU kernel is profiled on a CPU: no share, the evaluator's reason instead
      expect.eq(row.own_share, nil)
      expect.match(row.own_share_unknown, "CPU mode", row.problem .. ": why the own share is unknown")
    end
    expect.match(r.stdout, "| correct input, opt +| own +|\n", "the own column")
    expect.match(r.stdout, "\n%- own %? for row 1 %(01_rmsnorm%), row 2 %(02_linear%), row 3 %(softmax%): CPU mode",
      "the reason under the table, once")
    local p = by_problem(rows)
    -- the one-pass kernel against the chunked loop: a gap of about 5x, far beyond CPU noise
    expect.truthy(p["01_rmsnorm"].interleaved.optimized_vs_input > 1.5,
      "interleaved speedup of the one-pass kernel: " .. tostring(p["01_rmsnorm"].interleaved.optimized_vs_input))
    expect.eq(p.softmax.dtype, "fp32", "a run folder's own dtype")
    expect.match(r.stdout, "| problem +| eager +| compile +| input +| optimized +| max%-autotune +|", "Markdown into a pipe")
    local csv = calls.read_csv(dir .. "/out.csv")
    expect.eq(#csv, 3)
    expect.eq(csv[1].problem, "01_rmsnorm")
    expect.near(csv[1].optimized_ms, p["01_rmsnorm"].optimized_ms, 1e-9)
    expect.match(csv[1].own_share_unknown, "CPU mode")

    -- --resume keeps what is in the JSON file and measures nothing again
    local again = fake.run_agent("bench.lua", { dir .. "/ka", "--devices", "cpu", "--json", dir .. "/out.json", "--resume" },
      { KAGENT_PYTHON = spec.python }, 600)
    expect.eq(again.code, 0, again.stderr)
    expect.match(again.stderr, "01_rmsnorm: kept from")
    expect.falsy(again.stderr:find("01_rmsnorm: optimized", 1, true), "not measured again")
  end, { timeout = 600 })

  it("gives two run folders of one problem, passed one by one, a row each with its own figures", function()
    if not fake.cpu().have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("bench-two-runs")
    -- two runs of rmsnorm from the chunked loop: one kept it (no gain), one found the one-pass kernel
    local runs = { { id = "rmsnorm_small_20261201-100000_0001", best = "rmsnorm_small_chunked.py" },
      { id = "rmsnorm_small_20261201-110000_0002", best = "rmsnorm_small_fast.py" } }
    local argv = {}
    for _, run in ipairs(runs) do
      local rd = dir .. "/runs/" .. run.id
      copy("examples/problems/rmsnorm_small.py", rd .. "/problem.py")
      copy("examples/kernels/cpu/rmsnorm_small_chunked.py", rd .. "/input_kernel.py")
      copy("examples/kernels/cpu/" .. run.best, rd .. "/best_kernel.py")
      fs.write(rd .. "/summary.json", json.encode({ run_id = run.id, problem = "/x/rmsnorm_small.py", dtype = "fp32" }))
      argv[#argv + 1] = rd
    end
    for _, a in ipairs({ "--devices", "cpu", "--baselines", "eager", "--json", dir .. "/out.json" }) do argv[#argv + 1] = a end
    local r = fake.run_agent("bench.lua", argv, { KAGENT_PYTHON = spec.python }, 600)
    if r.code ~= 0 then error("bench.lua exited " .. r.code .. "\n" .. r.stderr:sub(-3000) .. r.stdout:sub(-2000)) end
    local rows = json.decode(assert(fs.read(dir .. "/out.json")))
    expect.eq(#rows, 2)
    expect.same({ rows[1].problem, rows[2].problem }, { runs[1].id, runs[2].id }, "each run named by its id, in the order given")
    expect.eq(rows[1].source, fs.abspath(argv[1]), "the first row measured the first run")
    expect.eq(rows[2].source, fs.abspath(argv[2]), "the second row measured the second run")
    -- the chunked loop against itself, the one-pass kernel against it (about 5x): far beyond noise
    expect.truthy(rows[1].interleaved.optimized_vs_input < 1.5 and rows[2].interleaved.optimized_vs_input > 1.5,
      "each row its own run's figures: " .. tostring(rows[1].interleaved.optimized_vs_input) .. " and "
      .. tostring(rows[2].interleaved.optimized_vs_input))
    expect.truthy(r.stdout:find(runs[1].id, 1, true) and r.stdout:find(runs[2].id, 1, true), "both runs in the table:\n" .. r.stdout)
  end, { timeout = 600 })

  it("reports KernelAgent's Triton artifacts as needing a GPU in CPU mode", function()
    if not fake.cpu().have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local ka = os.getenv("KAGENT_KA_ARTIFACTS")
    for _, d in ipairs({ kagent.root .. "/../shared/data/ka-artifacts", kagent.root .. "/shared/data/ka-artifacts" }) do
      if not ka and fs.exists(d .. "/benchmark.py") then ka = d end
    end
    if not ka or not fs.exists(ka .. "/benchmark.py") then
      skip("KernelAgent's artifacts are not at " .. (ka or (kagent.root .. "/../shared/data/ka-artifacts")) .. " (set KAGENT_KA_ARTIFACTS)")
    end
    local dir = spec.tmpdir("bench-ka")
    local r = fake.run_agent("bench.lua", { ka, "--devices", "cpu", "--dtype", "bf16", "--json", dir .. "/ka.json" },
      { KAGENT_PYTHON = spec.python }, 300)
    expect.eq(r.code, 0, r.stderr)
    local rows = json.decode(assert(fs.read(dir .. "/ka.json")))
    expect.eq(#rows, 5, "the five problems")
    expect.eq(rows[1].problem, "04_Matrix_vector_multiplication", "in KernelAgent's order")
    for _, row in ipairs(rows) do
      expect.eq(row.optimized_ms, json.null)
      expect.match(row.errors.optimized, "needs a GPU")
      expect.eq(row.correct.optimized, nil, "not judged")
    end
    -- one line says why, not a table of dashes and a note per figure
    expect.match(r.stdout, "\nTriton kernels need a GPU: the kernels of the 5 problem%(s%) are Triton")
    expect.falsy(r.stdout:find("not reported", 1, true), "no note per figure:\n" .. r.stdout)
    expect.falsy(r.stdout:find("| problem", 1, true), "no table of dashes")
  end, { timeout = 300 })
end)
