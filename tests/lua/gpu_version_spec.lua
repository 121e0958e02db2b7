-- The pool refuses an evaluator worker whose version is not kagent-rt's, and says what to do.
-- The worker here is a FAKE kagent_eval package (a ready line, nothing else) put first on the
-- workers' PYTHONPATH through the pool's `env`; the real one is exercised by gpu_spec.lua.
local fs, gpu = kagent.fs, kagent.gpu

local function fake_evaluator(version_field)
  local dir = spec.tmpdir("fake-eval")
  fs.mkdir_p(dir .. "/kagent_eval")
  fs.write(dir .. "/kagent_eval/__init__.py", "")
  fs.write(dir .. "/kagent_eval/worker.py", table.concat({
    "import json, os, sys",
    "ready = {'ready': True, 'device': 'cpu', 'mode': 'cpu', 'torch': None, 'triton': None,",
    "         'package': os.path.dirname(os.path.abspath(__file__))" .. version_field .. "}",
    "print(json.dumps(ready), flush=True)",
    "for line in sys.stdin:",
    "    pass",
  }, "\n") .. "\n")
  return dir
end

describe("gpu.pool", function()
  it("refuses a worker of another version, naming both versions and the fix", function()
    local dir = fake_evaluator(", 'version': '0.0.0-fake'")
    local pool = gpu.pool({ devices = "cpu", python = "python3", env = { PYTHONPATH = dir }, start_timeout = 30 })
    local devs, err, code = pool:devices()
    expect.eq(devs, nil)
    expect.eq(code, "EWORKER")
    expect.match(err, "evaluator version 0%.0%.0%-fake")
    expect.match(err, "kagent_eval from " .. dir:gsub("%p", "%%%0") .. "/kagent_eval")
    expect.match(err, "does not match kagent%-rt " .. kagent.version:gsub("%p", "%%%0"))
    expect.match(err, "pip install .*eval")
    pool:close()
  end)

  it("refuses a worker that reports no version", function()
    local dir = fake_evaluator("")
    local pool = gpu.pool({ devices = "cpu", python = "python3", env = { PYTHONPATH = dir }, start_timeout = 30 })
    local devs, err = pool:devices()
    expect.eq(devs, nil)
    expect.match(err, "evaluator version unknown")
    pool:close()
  end)

  it("accepts a worker of its own version", function()
    local dir = fake_evaluator(", 'version': '" .. kagent.version .. "'")
    local pool = gpu.pool({ devices = "cpu", python = "python3", env = { PYTHONPATH = dir }, start_timeout = 30 })
    local devs, err = pool:devices()
    expect.truthy(devs, err)
    expect.eq(devs[1].mode, "cpu")
    pool:close()
  end)
end)
