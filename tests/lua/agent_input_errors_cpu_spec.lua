-- An input kernel that cannot be loaded, said so a user can act (agents/search/input_failure.lua):
-- the file, the line and its text, the classes the file defines, and for a Triton kernel in CPU
-- mode that Triton needs a GPU. Unit cases on the evaluator's results as it returns them, then
-- agents/beam.lua end to end on the CPU (no LLM: the tuner). Needs torch for the end-to-end part.
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs = kagent.fs
local session = require("fake_session")
local cpu = session.cpu()
local input_failure = require("agents.search.input_failure")

local SYNTAX = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x)\n        return x\n"
local TRITON = "import torch\nimport triton\nimport triton.language as tl\n\nclass ModelNew(torch.nn.Module):\n"
  .. "    def forward(self, x):\n        return x\n"
local NO_MODELNEW = "import torch\n\nclass MyKernel(torch.nn.Module):\n    def forward(self, x):\n        return x\n"

local function traceback_at(line)
  return 'Traceback (most recent call last):\n  File "/x/kagent_eval/loader.py", line 42, in load_module\n'
    .. '  File "/tmp/kagent-eval-0/job-1-ab/candidate_q1w2e3.py", line ' .. line .. ', in <module>\n'
end

describe("an input kernel that fails to load", function()
  it("names the file, the line with its text, and the classes found", function()
    local msg = input_failure.message("/k/syntax.py", SYNTAX, { ok = false, stage = "audit", device = "cpu",
      error = "ESTATIC: syntax_error at line 3: expected ':'",
      audit = { static_findings = { { rule = "syntax_error", line = 3, text = "expected ':'" } } } })
    expect.eq(msg, "the input kernel /k/syntax.py fails at stage audit, line 3 (def forward(self, x)): ESTATIC: "
      .. "syntax_error at line 3: expected ':' (classes found in the file: ModelNew)")
    msg = input_failure.message("/k/mine.py", NO_MODELNEW, { ok = false, stage = "load", device = "cpu",
      error = "ELOAD: LookupError: candidate defines neither ModelNew nor kernel_function", traceback = "" })
    expect.match(msg, "^the input kernel /k/mine.py fails at stage load: ELOAD: LookupError: .* %(classes found in the file: MyKernel%)$")
  end)

  it("says Triton needs a GPU when a Triton kernel runs in CPU mode, and only then", function()
    local r = { ok = false, stage = "load", device = "cpu", error = "ELOAD: ModuleNotFoundError: No module named 'triton'",
      traceback = traceback_at(2) }
    local msg = input_failure.message("/k/tri.py", TRITON, r)
    expect.match(msg, "^the input kernel /k/tri.py fails at stage load, line 2 %(import triton%): ELOAD: ModuleNotFoundError")
    expect.match(msg, "Triton kernels need a GPU: CPU mode %(%-%-devices cpu%) runs PyTorch and C%+%+ kernels")
    r.device = "cuda:0"
    expect.falsy(input_failure.message("/k/tri.py", TRITON, r):find("need a GPU", 1, true), "on a GPU it is another fault")
  end)

  it("end to end: agents/beam.lua --devices cpu with a Triton kernel and with a syntax error", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("input-errors")
    local env = { KAGENT_PYTHON = spec.python, KAGENT_DB = dir .. "/mem.db", ANTHROPIC_API_KEY = false, OPENAI_API_KEY = false,
      KAGENT_LLM_URL = false, KAGENT_MODEL = false, OPENAI_BASE_URL = false, KAGENT_PROGRESS = "lines" }
    for name, src in pairs({ tri = TRITON, syntax = SYNTAX }) do
      assert(fs.write(dir .. "/" .. name .. ".py", src))
    end
    local r = session.run_agent("beam.lua", { "--problem", cpu.problem, "--kernel", dir .. "/tri.py", "--devices", "cpu",
      "--policy", "tune", "--out", dir .. "/runs" }, env, 300)
    expect.eq(r.code, 2, r.stderr)
    expect.match(r.stderr, "the input kernel " .. dir:gsub("%p", "%%%0") .. "/tri%.py fails at stage load, line 2 %(import triton%)")
    expect.match(r.stderr, "classes found in the file: ModelNew%)%. Triton kernels need a GPU")
    r = session.run_agent("beam.lua", { "--problem", cpu.problem, "--kernel", dir .. "/syntax.py", "--devices", "cpu",
      "--policy", "tune", "--out", dir .. "/runs" }, env, 300)
    expect.eq(r.code, 2, r.stderr)
    expect.match(r.stderr, "/syntax%.py fails at stage audit, line 3 %(def forward%(self, x%)%): ESTATIC: syntax_error")
  end, { timeout = 600 })
end)
