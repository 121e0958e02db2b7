-- agents/integrate.lua on the CPU: a Level 1 kernel (ReLU; CPU mode, so PyTorch) inside a Level 3
-- problem (ResNetBasicBlock, traced at a small batch), by class and by path; a kernel that
-- computes something else is left out with the reason; a dim-1 RMSNorm kernel (Level 1 #36's
-- layout) in a small Llama-shaped model through an adapter. Needs torch (KAGENT_PYTHON) and, for
-- the Level 3 cases, the KernelBench problems (../shared/data/kernelbench or KAGENT_KERNELBENCH);
-- skipped without them.
-- Timings are reported, not asserted (the machine is shared).
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs, json, proc = kagent.fs, kagent.json, kagent.proc
local fake = require("fake_session")
local cpu = fake.cpu()
local root = kagent.root
local fx = root .. "/tests/fixtures/integrate/"

local function kernelbench()
  for _, d in ipairs({ os.getenv("KAGENT_KERNELBENCH") or "", root .. "/../shared/data/kernelbench" }) do
    if d ~= "" and fs.exists(d .. "/level3/8_ResNetBasicBlock.py") then return d end
  end
end

local function integrate(dir, argv, full_size)
  local cmd = { kagent.exe, "--env-file", "/dev/null", root .. "/agents/integrate.lua", "--devices", "cpu",
    "--reps", "3", "--out", dir }
  if not full_size then cmd[#cmd + 1] = "--shrink" end
  for _, a in ipairs(argv) do cmd[#cmd + 1] = a end
  local r = proc.run(cmd, { timeout = 600, env = { KAGENT_PYTHON = spec.python, PATH = os.getenv("PATH") } })
  local names = fs.list(dir) or {}
  table.sort(names)
  local last = names[#names] and fs.join(dir, names[#names])
  return r, last and json.decode(assert(fs.read(fs.join(last, "summary.json")))), last
end

describe("agents/integrate.lua on CPU", function()
  it("replaces every ReLU of a Level 3 model by a Level 1 kernel, verifies the model and times it before and after", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local kb = kernelbench()
    if not kb then skip("no KernelBench problems (../shared/data/kernelbench; KAGENT_KERNELBENCH)") end
    local dir = spec.tmpdir("integrate")
    local model, relu = kb .. "/level3/8_ResNetBasicBlock.py", kb .. "/level1/19_ReLU.py"
    local r, s, run = integrate(dir .. "/class", { "--kernel", fx .. "relu_cpu.py", "--kernel-problem", relu,
      "--model", model, "--class", "ReLU" })
    expect.eq(r.code, 0, tostring(r.stdout) .. tostring(r.stderr):sub(-2000))
    expect.eq(s.verified, true)
    expect.same(s.replaced, { "relu" }, "the block's one ReLU module (called twice)")
    expect.eq(s.targets[1].matched, true)
    expect.truthy(type(s.model_ms_before) == "number" and type(s.model_ms_after) == "number", "timed before and after")
    expect.truthy(math.abs(s.in_model_speedup - s.model_ms_before / s.model_ms_after) < 1e-9, "the in-model speedup")
    expect.truthy(type(s.standalone_speedup) == "number", "the standalone speedup beside it")
    expect.eq(s.shrunk.batch_size[2], 2, "a small batch on CPU")
    local page = assert(fs.read(run .. "/report.html"))
    expect.match(page, "Kernel in the model")
    expect.match(page, "verified; in the model")
    expect.match(r.stdout, "x in the model")
    print(string.format("     in the model %.2fx, standalone %.2fx (CPU, shared machine)", s.in_model_speedup, s.standalone_speedup))

    -- by path: the same submodule
    local r2, s2 = integrate(dir .. "/path", { "--kernel", fx .. "relu_cpu.py", "--kernel-problem", relu,
      "--model", model, "--path", "relu" })
    expect.eq(r2.code, 0, tostring(r2.stderr):sub(-2000))
    expect.same(s2.replaced, { "relu" })
  end, { timeout = 900 })

  it("leaves a submodule the kernel does not compute, and says why; refuses bad input", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local kb = kernelbench()
    if not kb then skip("no KernelBench problems (../shared/data/kernelbench; KAGENT_KERNELBENCH)") end
    local dir = spec.tmpdir("integrate-no")
    local model, relu = kb .. "/level3/8_ResNetBasicBlock.py", kb .. "/level1/19_ReLU.py"
    local r, s = integrate(dir .. "/gelu", { "--kernel", fx .. "gelu_cpu.py", "--kernel-problem", relu,
      "--model", model, "--class", "ReLU" })
    expect.eq(r.code, 1)
    expect.eq(s.verified, false)
    expect.eq(s.targets[1].matched, false)
    expect.match(s.targets[1].reason, "does not compute this submodule")
    expect.eq(#s.replaced, 0)
    local r2, s2 = integrate(dir .. "/none", { "--kernel", fx .. "relu_cpu.py", "--kernel-problem", relu,
      "--model", model, "--path", "no.such.layer" })
    expect.eq(r2.code, 1)
    expect.match(s2.error, "ENOMATCH")
    local r3 = integrate(dir .. "/bad", { "--kernel", fx .. "relu_cpu.py", "--kernel-problem", relu, "--model", model })
    expect.eq(r3.code, 2)
    expect.match(r3.stderr, "give one of %-%-class and %-%-path")
    -- results that could not be kept: refused before the model is loaded
    fs.write(dir .. "/afile", "x")
    local r4 = integrate(dir .. "/afile", { "--kernel", fx .. "relu_cpu.py", "--kernel-problem", relu, "--model", model,
      "--class", "ReLU" })
    expect.eq(r4.code, 2)
    expect.match(r4.stderr, "%-%-out .*afile is not a folder")
  end, { timeout = 900 })

  it("puts a kernel written for another layout in through an adapter, and refuses a wrong adapter", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("integrate-adapter")
    local args = { "--kernel", root .. "/examples/kernels/cpu/rmsnorm_small_fast.py",
      "--kernel-problem", root .. "/examples/problems/rmsnorm_small.py", "--model", fx .. "llama_like_cpu.py",
      "--class", "LlamaRMSNorm" }
    -- without the adapter the kernel (over dim 1, no weight) computes none of the model's norms
    local r0, s0 = integrate(dir .. "/plain", args, true)
    expect.eq(r0.code, 1, tostring(r0.stderr):sub(-2000))
    expect.eq(#s0.replaced, 0)
    expect.eq(#s0.targets, 5, "two per layer and the last")

    local with = { unpack(args) }
    with[#with + 1], with[#with + 2] = "--adapter", root .. "/examples/adapters/rmsnorm_dim1_as_llama.py"
    local r, s, run = integrate(dir .. "/adapted", with, true)
    expect.eq(r.code, 0, tostring(r.stdout) .. tostring(r.stderr):sub(-2000))
    expect.eq(s.verified, true)
    expect.same(s.replaced, { "layers.0.input_layernorm", "layers.0.post_attention_layernorm",
      "layers.1.input_layernorm", "layers.1.post_attention_layernorm", "norm" })
    expect.match(s.adapter, "rmsnorm_dim1_as_llama%.py$")
    expect.truthy(type(s.in_model_speedup) == "number" and type(s.standalone_speedup) == "number", "both speedups")
    expect.match(assert(fs.read(run .. "/report.html")), "through the adapter")

    local bad = { unpack(args) }
    bad[#bad + 1], bad[#bad + 2] = "--adapter", fx .. "rmsnorm_no_weight_adapter.py"
    local r2, s2 = integrate(dir .. "/no-weight", bad, true)
    expect.eq(r2.code, 1)
    expect.eq(#s2.replaced, 0)
    expect.match(s2.targets[1].reason, "does not compute this submodule")

    local missing = { unpack(args) }
    missing[#missing + 1], missing[#missing + 2] = "--adapter", dir .. "/none.py"
    local r3 = integrate(dir .. "/missing", missing, true)
    expect.eq(r3.code, 2)
    expect.match(r3.stderr, "%-%-adapter must name a file")
  end, { timeout = 900 })
end)
