-- agents/integrate.lua on the CPU: a Level 1 kernel (ReLU; CPU mode, so PyTorch) inside a Level 3
-- problem (ResNetBasicBlock, traced at a small batch), by class and by path; a kernel that
-- computes something else is left out with the reason; a dim-1 RMSNorm kernel (Level 1 #36's
-- layout) in a small Llama-shaped model through an adapter; the model's figure as the evaluator's
-- (spread, trust); beam.lua --objective in-model ranking by that figure with the fake LLM server
-- (tests/fixtures/fake_llm). Needs torch (KAGENT_PYTHON) and, for
-- the Level 3 cases, the KernelBench problems (../shared/data/kernelbench or KAGENT_KERNELBENCH);
-- skipped without them.
-- Timings are reported, not asserted (the machine is shared); that the model's figure is the
-- evaluator's (its spread and trust record) is.
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
  it("times the model through the evaluator: a verified in-model figure with its spread and trust", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("integrate-mlp")
    local r, s, run = integrate(dir, { "--kernel", fx .. "relu_cpu.py", "--kernel-problem", root .. "/tests/fixtures/eval/relu_problem.py",
      "--model", fx .. "relu_mlp_model.py", "--class", "ReLU" }, true)
    expect.eq(r.code, 0, tostring(r.stdout) .. tostring(r.stderr):sub(-2000))
    expect.eq(s.verified, true)
    expect.same(s.replaced, { "act1", "act2" })
    local m = s.in_model
    expect.eq(m.ok, true)
    for _, k in ipairs({ "model_ms_before", "model_ms_after", "p10", "p90", "spread", "n" }) do
      expect.eq(type(m[k]), "number", k)
    end
    expect.truthy(m.p10 <= m.model_ms_after and m.model_ms_after <= m.p90, "the median inside its spread")
    expect.eq(type(m.trust), "table", "the trust rules' record (first flags, re-measured)")
    expect.eq(type(m.trust.remeasured), "boolean")
    expect.eq(s.model_ms_after, m.model_ms_after, "the figure reported is the evaluator's")
    expect.truthy(math.abs(s.in_model_speedup - m.model_ms_before / m.model_ms_after) < 1e-9)
    expect.match(r.stdout, "p10%-p90")
    expect.match(assert(fs.read(run .. "/report.html")), "spread")
    print(string.format("     MLP: %.4f ms -> %.4f ms (p10-p90 %.4f-%.4f, spread %.2f, %d calls, re-measured %s): %.2fx in the model",
      m.model_ms_before, m.model_ms_after, m.p10, m.p90, m.spread, m.n, tostring(m.trust.remeasured), s.in_model_speedup))
  end, { timeout = 600 })

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

  it("beam.lua --objective in-model ranks candidates by the model's time with the kernel in it", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("integrate-beam")
    -- ALPHA: fast on its own problem, slow in the model; BETA: the other way round (the fixtures
    -- say how). Ranked by the kernel alone ALPHA would win; ranked by the model BETA must.
    local diagnosis = fake.fenced({ bottlenecks = {
      { category = "memory", summary = "DIRECTION_ALPHA: extra passes", skill = "fusion", reasoning = "scripted",
        root_causes = {}, recommended_fixes = { { fix = "one pass", rationale = "scripted" } } },
      { category = "latency", summary = "DIRECTION_BETA: extra passes", skill = "ilp", reasoning = "scripted",
        root_causes = {}, recommended_fixes = { { fix = "one pass", rationale = "scripted" } } } } })
    local function block(name) return "Changed it.\n```python\n" .. assert(fs.read(fx .. name)) .. "```\n" end
    local server, port = fake.start({ latency = 0, replies = {
      { match = "# BOTTLENECK ANALYSIS", text = diagnosis },
      { match = "# REFLEXION", text = fake.fenced({ was_diagnosis_correct = true, was_fix_effective = true,
        expected_outcome = "x", actual_outcome = "y", reasoning = "scripted", lessons = {}, avoid_patterns = {}, try_patterns = {} }) },
      { match = "DIRECTION_ALPHA", text = block("relu_fast_alone_cpu.py") },
      { match = "DIRECTION_BETA", text = block("relu_fast_in_model_cpu.py") },
    } }, dir)
    local r = fake.run_beam({ "--problem", root .. "/tests/fixtures/eval/relu_problem.py", "--kernel", fx .. "relu_busy_cpu.py",
      "--rounds", "1", "--beam", "2", "--directions", "2", "--plateau", "0", "--devices", "cpu", "--out", dir .. "/runs",
      "--objective", "in-model", "--model-file", fx .. "relu_mlp_model.py", "--model-class", "ReLU" }, cpu.env(dir, port), 900)
    server:kill()
    server:wait()
    expect.eq(r.code, 0, tostring(r.stdout):sub(-2000) .. tostring(r.stderr):sub(-3000))
    local run = fake.newest_run(dir .. "/runs")
    local s = json.decode(assert(fs.read(run .. "/summary.json")))
    expect.eq(s.objective, "in-model")
    expect.match(assert(fs.read(run .. "/best_kernel.py")), "MODEL_FAST", "the kernel that makes the model faster")
    expect.eq(s.best_ms, s.in_model.model_ms_after, "the result's figure is the model's with the kernel in it")
    expect.eq(type(s.kernel_alone.time_ms.median), "number", "the kernel-alone figure beside it")
    expect.match(tostring(r.stdout) .. tostring(r.stderr), "ranked by the model: kernel alone [%d.]+ ms .*in the model [%d.]+ ms")
    -- every candidate was ranked by its in-model figure: each attempt's time is its in-model median
    local input = json.decode(assert(fs.read(run .. "/input_eval.json")))
    expect.eq(input.time_ms.median, input.in_model.model_ms_after)
    print(string.format("     in the model: input %.4f ms, best %.4f ms; kernel alone: input %.4f ms, best %.4f ms (CPU, shared)",
      input.in_model.model_ms_after, s.in_model.model_ms_after, input.kernel.time_ms.median, s.kernel_alone.time_ms.median))
    -- a bad objective's options are refused before any work
    local bad = fake.run_beam({ "--problem", root .. "/tests/fixtures/eval/relu_problem.py", "--devices", "cpu", "--out", dir .. "/runs",
      "--objective", "in-model", "--model-file", fx .. "relu_mlp_model.py" }, cpu.env(dir), 120)
    expect.eq(bad.code, 2)
    expect.match(bad.stderr, "give one of %-%-model%-class and %-%-model%-path")
  end, { timeout = 900 })
end)
