-- End to end on the CPU: `agents/beam.lua --language cuda --devices cpu` against the FAKE LLM
-- server (tests/fixtures/fake_llm/server.py). With no GPU, --language cuda means C++ through
-- load_inline's cpp_sources (agents/run/language.lua). The seed's reply states its granularity
-- and carries C++ that does not compile; the repair prompt shows the compiler's error (file:line);
-- the repaired C++ verifies and is confirmed; a second run of the same source finds its build in
-- the evaluator's compile cache. Needs torch (KAGENT_PYTHON) and a C++ toolchain with
-- torch's headers (Debian: libtorch-dev, pybind11-dev): without them the spec says skipped.
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs, json, proc = kagent.fs, kagent.json, kagent.proc
local fake = require("fake_session")
local cpu = fake.cpu()
local problem = cpu.problem

-- can_compile() -> true, or false and why: a tiny cpp_sources module built with load_inline
local function can_compile(dir)
  local code = table.concat({
    "import os, sys",
    "os.environ['TORCH_EXTENSIONS_DIR'] = sys.argv[1]",
    "from torch.utils.cpp_extension import load_inline",
    "m = load_inline(name='kagent_probe', cpp_sources='int one() { return 1; }', functions=['one'])",
    "assert m.one() == 1",
  }, "\n")
  local r = proc.run({ spec.python, "-c", code, dir }, { timeout = 300 })
  if r and r.code == 0 then return true end
  return false, (r and r.stderr or "did not run"):match("([^\n]*error[^\n]*)") or "load_inline failed"
end

local the_run = fake.only_run
-- the seed's compile error: cpp_fast.py with an undeclared name on one line of its cpp_sources,
-- which the repair prompt must show
local UNDECLARED = { "* inv;", "* inv_rms;" }

describe("agents/beam.lua --language cuda on CPU with the fake LLM server", function()
  it("goes seed -> compile error -> repair with the compiler's line -> verified C++ kernel -> confirmed", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("lang-cuda")
    local ok, why = can_compile(dir .. "/probe-ext")
    if not ok then skip("load_inline cannot compile C++ here (install libtorch-dev and pybind11-dev): " .. why) end
    local server, port = fake.start({ latency = 0, replies = {
      { match = "# REFINE KERNEL", text = cpu.code_block("cpp_fast.py") },
      { match = "# GENERATE KERNEL", text = "GRANULARITY: full rewrite\n" .. cpu.code_block("cpp_fast.py", UNDECLARED) },
    } }, dir)
    -- the evaluator's sandbox (and so its compile cache) of this spec's own: the first build is cold
    -- whatever ran before, and both runs share it
    local env = cpu.env(dir, port)
    env.KAGENT_EVAL_SANDBOX_DIR = dir .. "/sandbox"
    assert(fs.mkdir_p(env.KAGENT_EVAL_SANDBOX_DIR))
    local r = fake.run_agent("beam.lua", { "--problem", problem, "--language", "cuda", "--devices", "cpu",
      "--rounds", "0", "--gen-workers", "1", "--refine", "2", "--out", dir .. "/runs" }, env, 900)
    server:kill()
    if r.code ~= 0 then error("beam.lua exited " .. r.code .. "\n" .. r.stderr:sub(-3000)) end
    local rd = the_run(dir .. "/runs")
    local w1 = rd .. "/generate/w1/"
    -- the seed's prompt asks for C++ through load_inline and for its granularity
    local gp = fs.read(w1 .. "gen_prompt.txt")
    expect.match(gp, "cpp_sources", "CPU mode with --language cuda asks for C++")
    expect.match(gp, "no\n?%s*`cuda_sources`", "and says CUDA needs a GPU")
    expect.match(gp, "GRANULARITY: full rewrite", "the prompt asks for the granularity line")
    -- the seed did not compile; the repair prompt carries the compiler's file:line and message
    local v0 = json.decode(fs.read(w1 .. "verify_0.json"))
    expect.eq(v0.ok, false)
    local rp = fs.read(w1 .. "refine_1_prompt.txt")
    expect.match(rp, "main%.cpp:%d+:%d+: error: [^\n]*inv_rms", "the compiler's file:line and message")
    -- cut to the errors (src/gpu/eval/kagent_eval/child/compiler_errors.py): no build log
    expect.falsy(rp:find("-isystem", 1, true) or rp:find("ninja: build stopped", 1, true), "no ninja log:\n" .. rp)
    expect.eq(v0.stage, "load")
    expect.match(v0.error, "^ECOMPILE")
    expect.eq(json.decode(fs.read(w1 .. "verify_1.json")).ok, true, "the repaired C++ verified")
    -- confirmed, with what it was written in, the policy and the seed's granularity recorded
    local s = json.decode(fs.read(rd .. "/summary.json"))
    expect.eq(s.status, "done")
    expect.eq(s.verified, true)
    expect.eq(s.language, "cuda")
    expect.eq(s.library, "own", "beam.lua's default policy")
    expect.eq(s.granularity, "full_rewrite")
    expect.eq(s.input_kernel, "generated (worker 1, 2 attempt(s))")
    expect.match(fs.read(rd .. "/best_kernel.py"), "load_inline%(name=\"rmsnorm_cpp_fixture\"")
    local g = json.decode(fs.read(rd .. "/generate/summary.json"))
    expect.eq(g.outcomes[1].granularity, "full_rewrite")
    expect.eq(json.decode(fs.read(w1 .. "verify_1.json")).compile.cached, false, "the repaired C++ compiled cold")

    -- a second run of the same source (no LLM: the tuner) finds its build in the compile cache,
    -- and its --library reaches the evaluator's verdict
    local no_llm = cpu.env(dir)
    no_llm.KAGENT_EVAL_SANDBOX_DIR = env.KAGENT_EVAL_SANDBOX_DIR
    local r2 = fake.run_agent("beam.lua", { "--problem", problem, "--kernel", rd .. "/best_kernel.py", "--language", "cuda",
      "--library", "any", "--devices", "cpu", "--rounds", "0", "--out", dir .. "/runs2" }, no_llm, 900)
    if r2.code ~= 0 then error("beam.lua (second run) exited " .. r2.code .. "\n" .. r2.stderr:sub(-3000)) end
    local rd2 = the_run(dir .. "/runs2")
    local input = json.decode(fs.read(rd2 .. "/input_eval.json"))
    expect.eq(input.compile.cached, true, "the build came from the cache")
    expect.eq(input.library, "any", "the evaluator judged it under --library any")
    expect.eq(json.decode(fs.read(rd2 .. "/summary.json")).library, "any")
  end, { timeout = 1500 })
end)
