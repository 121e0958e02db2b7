-- bench/round_wall.lua: is a round of agents/beam.lua as short as its critical path?
--   kagent-rt bench/round_wall.lua [--latency 20] [--workers 4] [--problem P --kernel K --reply K2 ...]
-- Runs one round with W workers (one parent, W directions) against the FAKE LLM server whose
-- every reply takes --latency seconds. The critical path is 3 LLM calls (diagnose, rewrite,
-- reflexion) plus the GPU work the round needed (the evaluator jobs, one at a time per device).
-- Prints measured round wall time against that sum; the goal is within 15%.
package.path = kagent.root .. "/?.lua;" .. kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs, json = kagent.fs, kagent.json
local run_lib = require("agents.run")
local fake = require("fake_session")

local spec = {
  latency = { type = "number", min = 0, default = 20, help = "seconds per scripted LLM reply" },
  workers = { type = "integer", min = 1, default = 4, help = "workers in the round (directions of one parent)" },
  problem = { type = "string", default = "examples/problems/rmsnorm_small.py" },
  kernel = { type = "string", default = "examples/kernels/cpu/rmsnorm_small_chunked.py", help = "the round's parent" },
  reply = { type = "string", default = "tests/fixtures/agent/cpu/fast.py,tests/fixtures/agent/cpu/slow2.py,tests/fixtures/agent/cpu/slow.py,tests/fixtures/agent/cpu/fast_dup.py",
    help = "comma-separated kernels the fake LLM returns, one per direction" },
  dtype = { type = "string", default = "fp32" },
  devices = { type = "string", help = "passed to beam.lua" },
  out = { type = "string", default = "/tmp/kagent-bench-round-wall" },
}
local opts, _, code = run_lib.parse("bench/round_wall.lua", kagent.args, spec)
if not opts then return code end

local kernels = {}
for p in opts.reply:gmatch("[^,]+") do kernels[#kernels + 1] = kagent.root .. "/" .. p end
fs.mkdir_p(opts.out)
local server, port = fake.start(fake.script({ n = opts.workers, kernels = kernels, delay = opts.latency }), opts.out)
local argv = { "--problem", opts.problem, "--kernel", opts.kernel, "--rounds", "1", "--beam", "1",
  "--directions", tostring(opts.workers), "--dtype", opts.dtype, "--out", opts.out, "--refine", "0" }
if opts.devices then argv[#argv + 1] = "--devices"; argv[#argv + 1] = opts.devices end
local r = fake.run_beam(argv, fake.env(port, { KAGENT_DB = opts.out .. "/mem.db" }))
server:kill()
if r.code ~= 0 then io.stderr:write(r.stderr); return 1 end
local rd = fake.newest_run(opts.out)
local round = json.decode(fs.read(rd .. "/rounds/round_1/round.json"))

-- GPU work of the round: every evaluator job the workers ran (they share the device queue)
local gpu_s, jobs = 0, 0
for w = 1, opts.workers do
  local i = 0
  while true do
    local s = fs.read(string.format("%s/rounds/round_1/w%d/verify_%d.json", rd, w, i))
    if not s then break end
    local v = json.decode(s)
    gpu_s = gpu_s + (v.elapsed or 0)
    jobs = jobs + 1
    i = i + 1
  end
end
local devices = 1
local llm_path = 3 * opts.latency
local ideal = llm_path + gpu_s / devices
local ratio = round.wall_s / ideal
print(string.format("workers %d, LLM latency %.1f s/call", opts.workers, opts.latency))
print(string.format("critical path: LLM %.2f s (3 calls) + GPU work %.2f s (%d jobs) = %.2f s", llm_path, gpu_s, jobs, ideal))
print(string.format("round wall time: %.2f s  -> %.3fx the critical path (%s 1.15)", round.wall_s, ratio,
  ratio <= 1.15 and "within" or "ABOVE"))
print(string.format("serial would be: %.2f s (every LLM call and job one after another)",
  opts.latency * (1 + 2 * opts.workers) + gpu_s))
print("run directory: " .. rd)
return ratio <= 1.15 and 0 or 1
