-- `kagent-eval check` (src/gpu/eval/kagent_eval/worker/oneshot.py) against the pool (kagent.gpu): the
-- same job on the CPU examples gives the same verdict (stage and error code) and a time within
-- the noise of two measurements on a shared machine; a wrong kernel fails at the same stage.
local fs, json, proc, gpu = kagent.fs, kagent.json, kagent.proc, kagent.gpu

local root = kagent.root
local CASES = {
  { "examples/problems/rmsnorm_small.py", "examples/kernels/cpu/rmsnorm_small_chunked.py" },
  { "examples/problems/softmax.py", "examples/kernels/cpu/softmax.py" },
  { "examples/problems/relu_signed.py", "examples/kernels/cpu/relu_signed.py" },
  { "examples/problems/rmsnorm_small.py", "tests/fixtures/agent/cpu/broken.py" },
}

local function have_torch()
  local r = proc.run({ spec.python, "-c", "import torch" }, { timeout = 60 })
  return r and r.code == 0
end

-- check(problem, kernel) -> the result `kagent-eval check --json` printed, and its exit status
local function check(problem, kernel)
  local r = assert(proc.run({ spec.python, "-m", "kagent_eval", "check", problem, kernel, "--device", "cpu", "--json" },
    { env = { PYTHONPATH = root .. "/src/gpu/eval" }, cwd = root, timeout = 300 }))
  local res = json.decode(r.stdout)
  if type(res) ~= "table" then error("kagent-eval check printed no JSON (exit " .. r.code .. "):\n" .. r.stderr:sub(-2000)) end
  return res, r.code
end

-- within_noise(a, b): the two timings' p10..p90 ranges, each widened by a quarter, overlap (CPU
-- timings on a loaded 2-core machine move by tens of percent between two processes)
local function within_noise(a, b)
  return a.p10 / 1.25 <= b.p90 * 1.25 and b.p10 / 1.25 <= a.p90 * 1.25
end

describe("kagent-eval check", function()
  it("agrees with the pool's verdict and time on the CPU examples", function()
    if not have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local pool = gpu.pool({ devices = "cpu", python = spec.python, timeout = 300 })
    for _, c in ipairs(CASES) do
      local problem, kernel = root .. "/" .. c[1], root .. "/" .. c[2]
      local job = { problem = problem, candidate = assert(fs.read(kernel)), dtype = "fp32", tolerance = "strict",
        bench = { baselines = { "eager", "compile" } }, profile = { metric_set = "full" } }
      local want = pool:evaluate(job)
      local got, code = check(problem, kernel)
      local what = c[2] .. ": pool " .. tostring(want.ok) .. "/" .. tostring(want.stage) .. ", check "
        .. tostring(got.ok) .. "/" .. tostring(got.stage)
      expect.eq(got.ok, want.ok, what)
      expect.eq(got.stage, want.stage, what)
      expect.eq(code, want.ok and 0 or 1, what .. ": exit status")
      if want.ok then
        print(string.format("     %s: pool %.4f ms [%.4f..%.4f], check %.4f ms [%.4f..%.4f]", c[2], want.time_ms.median,
          want.time_ms.p10, want.time_ms.p90, got.time_ms.median, got.time_ms.p10, got.time_ms.p90))
        expect.truthy(within_noise(want.time_ms, got.time_ms), what .. ": times apart beyond noise")
        expect.eq(type(got.eager_ms), "number", what .. ": the eager baseline")
      else
        expect.eq(tostring(got.error):match("^(%u+)"), tostring(want.error):match("^(%u+)"), what .. ": error code")
      end
    end
    pool:close()
  end, { timeout = 900 })

  it("a python without torch: one line, exit 3", function()
    local dir = spec.tmpdir("check-python")
    -- a FAKE python without torch: the system python without its site packages
    local python = dir .. "/python-without-torch"
    fs.write(python, string.format('#!/bin/sh\nexec "%s" -S "$@"\n', spec.python))
    expect.eq(proc.run({ "chmod", "+x", python }).code, 0)
    local r = assert(proc.run({ spec.python, "-m", "kagent_eval", "check", root .. "/examples/problems/softmax.py",
      root .. "/examples/kernels/cpu/softmax.py", "--device", "cpu", "--python", python },
      { env = { PYTHONPATH = root .. "/src/gpu/eval" }, cwd = dir, timeout = 120 }))
    expect.eq(r.code, 3, r.stderr)
    expect.match(r.stderr, "^kagent%-eval: the evaluator worker did not start: ModuleNotFoundError: No module named 'torch' %(the python "
      .. python:gsub("%p", "%%%0") .. " lacks it")
    expect.eq(select(2, r.stderr:gsub("\n", "")), 1, "one line:\n" .. r.stderr)
  end, { timeout = 120 })
end)
