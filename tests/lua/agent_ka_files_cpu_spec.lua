-- A run folder read by KernelAgent's own code: the reading half of its benchmark.py (_import,
-- _bind_kernel; taken from KAGENT_KA_ARTIFACTS, default ../shared/data/ka-artifacts beside the
-- checkout, and skipped where it is absent; never copied here) loads the run's problem.py,
-- input_kernel.py and optimized_kernel_beam_search.py, and a round's benchmark_results.json has
-- KernelAgent's keys (kernel_round_<r>, dtype "torch.float32", warmup, repeat, size).
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs, json, proc = kagent.fs, kagent.json, kagent.proc
local session = require("fake_session")
local cpu = session.cpu()

local function ka_benchmark()
  local dirs = { os.getenv("KAGENT_KA_ARTIFACTS"), kagent.root .. "/../shared/data/ka-artifacts",
    kagent.root .. "/shared/data/ka-artifacts" }
  for i = 1, 3 do
    if dirs[i] and fs.exists(dirs[i] .. "/benchmark.py") then return dirs[i] .. "/benchmark.py" end
  end
end

-- Run by spec.python: KernelAgent's benchmark.py loaded as a module (its top imports triton.testing
-- for do_bench, which reading never calls: a FAKE stands in where triton is not installed), then
-- its loaders on the run folder, on the CPU (its _prepare moves everything to CUDA: not used).
local READER = [[
import importlib.util, json, pathlib, sys, types
bench_py, run = sys.argv[1], pathlib.Path(sys.argv[2])
try:
    import triton.testing  # noqa: F401
except ImportError:
    fake = types.ModuleType("triton"); fake.testing = types.ModuleType("triton.testing")
    fake.testing.do_bench = None
    sys.modules["triton"], sys.modules["triton.testing"] = fake, fake.testing
spec = importlib.util.spec_from_file_location("ka_benchmark", bench_py)
ka = importlib.util.module_from_spec(spec); spec.loader.exec_module(ka)
import torch
prob = ka._import(run / "problem.py")
model = prob.Model(*prob.get_init_inputs()).eval()
inputs = prob.get_inputs()
want = model(*inputs)
out = {}
for name in ("input_kernel.py", "optimized_kernel_beam_search.py"):
    fn = ka._bind_kernel(run / name, model)
    out[name] = bool(torch.allclose(fn(*inputs), want, rtol=1e-4, atol=1e-4))
rounds = {}
for f in sorted(run.glob("rounds/round_*/w*/benchmark_results.json")):
    d = json.loads(f.read_text())
    rounds[str(f.relative_to(run))] = {"keys": sorted(d), "dtype": d["dtype"], "device": d["device"],
        "kernels": {k: v.get("time_ms") for k, v in d["kernels"].items()}}
print(json.dumps({"kernels": out, "rounds": rounds}))
]]

describe("KernelAgent's benchmark.py", function()
  it("reads a kagent-rt run folder", function()
    local bench = ka_benchmark()
    if not bench then skip("KernelAgent's benchmark.py is not at ../shared/data/ka-artifacts (set KAGENT_KA_ARTIFACTS)") end
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("ka-files")
    local r = session.run_agent("beam.lua", { "--problem", cpu.problem, "--kernel", cpu.fx .. "kernel_function.py",
      "--tuner", "--rounds", "1", "--tune-candidates", "2", "--devices", "cpu", "--out", dir .. "/runs" }, cpu.env(dir), 280)
    expect.eq(r.code, 0, r.stderr:sub(-2000))
    local rd = session.newest_run(dir .. "/runs")
    local reader = dir .. "/read_with_ka.py"
    fs.write(reader, READER)
    local p = assert(proc.run({ spec.python, reader, bench, rd }, { timeout = 120 }))
    expect.eq(p.code, 0, p.stderr:sub(-2000))
    local got = json.decode(p.stdout)
    expect.same(got.kernels, { ["input_kernel.py"] = true, ["optimized_kernel_beam_search.py"] = true })
    local n = 0
    for path, b in pairs(got.rounds) do
      n = n + 1
      for _, k in ipairs({ "device", "dtype", "kernels", "problem", "repeat", "size", "warmup" }) do
        expect.truthy(kagent.json.encode(b.keys):find('"' .. k .. '"', 1, true), path .. ": key " .. k)
      end
      expect.eq(b.dtype, "torch.float32", path)
      expect.eq(b.device, "cpu", path)
      local names = {}
      for name in pairs(b.kernels) do names[#names + 1] = name end
      expect.same(names, { "kernel_round_1" }, path)
    end
    expect.truthy(n >= 1, "the round's benchmark_results.json files were read")
  end, { timeout = 290 })
end)
