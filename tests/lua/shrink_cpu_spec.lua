-- --shrink of the runs (agents/run/shrink.lua): the problem's smaller copy, and agents/beam.lua
-- (the LLM-free tuner, no rounds) working on it in CPU mode (needs a python with torch:
-- KAGENT_PYTHON).
local fs, proc = kagent.fs, kagent.proc
local shrink = require("agents.run.shrink")

describe("the shrunk problem", function()
  it("sets the lowered size constants after the problem's own code", function()
    local code = "batch_size = 128\ndim = 4096\ndef get_inputs():\n    return [torch.rand(batch_size, dim)]\n"
    local out = shrink.source(code, { dim = { 4096, 16 }, batch_size = { 128, 2 } })
    expect.eq(out:sub(1, #code), code, "the problem's code is kept as it is")
    expect.match(out, "\nbatch_size = 2  # was 128\ndim = 16  # was 4096\n$")
    expect.eq(shrink.text({ dim = { 4096, 16 }, batch_size = { 128, 2 } }), "batch_size 128→2, dim 4096→16")
  end)
end)

describe("agents/beam.lua --shrink", function()
  it("works on the smaller copy of its problem", function()
    local r0 = proc.run({ spec.python, "-c", "import torch" }, { timeout = 60 })
    if not (r0 and r0.code == 0) then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("shrink")
    local env = { KAGENT_PYTHON = spec.python, KAGENT_DB = false, KAGENT_LLM_DB = false, KAGENT_PROGRESS = "lines" }
    local r = assert(proc.run({ os.getenv("KAGENT_BIN") or "/proc/self/exe", "--env-file", "/dev/null",
      kagent.root .. "/agents/beam.lua", "--policy", "tune", "--problem", kagent.root .. "/examples/problems/softmax.py",
      "--kernel", kagent.root .. "/examples/kernels/cpu/softmax.py", "--shrink", "--rounds", "0", "--devices", "cpu",
      "--out", dir .. "/runs", "--db", dir .. "/k.db" }, { cwd = kagent.root, env = env, timeout = 600 }))
    -- an honest kernel is confirmed (0), or, where the machine stayed too noisy to time it, not
    -- measured (7, ENOISY): never refused (5) for the machine's noise (noise.py)
    local confirmed = r.code == 0
    if not confirmed then
      expect.eq(r.code, 7, r.stderr:sub(-2000))
      expect.match(r.stderr, "ENOISY")
    end
    expect.match(r.stderr, "%-%-shrink: batch_size 16→2, dim 16384→16")
    local run
    for _, n in ipairs(assert(fs.list(dir .. "/runs"))) do if fs.is_dir(dir .. "/runs/" .. n) then run = n end end
    local copy = assert(fs.read(dir .. "/runs/" .. run .. "/" .. shrink.FILE))
    expect.match(copy, "\ndim = 16  # was 16384\n")
    -- the run's problem is the copy: the input kernel was verified and timed on it
    local summary = kagent.json.decode(assert(fs.read(dir .. "/runs/" .. run .. "/summary.json")))
    expect.eq(summary.problem, dir .. "/runs/" .. run .. "/" .. shrink.FILE)
    if confirmed then expect.eq(summary.verified, true) end
    expect.eq(summary.shrunk.dim[1], 16384)
    expect.eq(summary.shrunk.dim[2], 16, "the summary says the sizes the run worked at")
  end)
end)
