-- Writes the run folders the browser test opens, under the folder given: a real CPU run of
-- agents/beam.lua against the FAKE LLM server (its report.html and index.html written by the run
-- itself), and a FAKE three-round GPU run folder (tests/fixtures/report/synthetic_run.lua) whose
-- report shows the roofline and failed attempts. Prints the CPU run's folder.
--   kagent-rt tests/browser/make_runs.lua OUT
spec = { python = os.getenv("KAGENT_PYTHON") or "python3" }
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. kagent.root .. "/tests/fixtures/report/?.lua;" .. package.path
local fs = kagent.fs
local fake = require("fake_session")
local session = require("replay_session")
local report = require("agents.tools.report")

local out = assert(kagent.args[1], "usage: make_runs.lua OUT")
fs.mkdir_p(out)
if not fake.cpu().have_torch() then
  io.stderr:write("no torch for " .. spec.python .. " (set KAGENT_PYTHON)\n")
  return 77
end
local server, port = fake.start(session.script(), out)
local r = fake.run_agent("beam.lua", session.argv(out .. "/runs"), session.env(port, out, "record"), 900)
server:kill()
if r.code ~= 0 then
  io.stderr:write("the CPU run exited " .. r.code .. "\n" .. r.stderr:sub(-3000) .. "\n")
  return 1
end
local run = fake.newest_run(out .. "/runs")
local synthetic = require("synthetic_run")
local gpu = synthetic.write(out .. "/gpu_runs/fake_20261123-120000_abcd")
assert(report.run_page(gpu))
assert(report.runs_index(out .. "/gpu_runs"))

-- A run still going: the CPU run's folder as it was before its summary, its state put back to
-- round 0 (check_live.js moves it on and rewrites the page, which must reload itself).
local live = out .. "/live/" .. fs.basename(run)
fs.mkdir_p(out .. "/live")
assert(kagent.proc.run({ "cp", "-r", run, live }).code == 0)
for _, f in ipairs({ "summary.json", "report.html", "best_kernel.py", "best_eval.json", "optimized_kernel_beam_search.py" }) do
  fs.remove(live .. "/" .. f)
end
local st = kagent.json.decode(assert(fs.read(live .. "/state.json")))
st.round = 0
fs.write(live .. "/state.json", kagent.json.encode(st))
assert(report.run_page(live))

-- Three FAKE finished runs whose best times differ, for sorting, filtering and the speedups chart.
for i, best in ipairs({ 3.0, 1.0, 2.0 }) do
  local id = string.format("fake_20261123-12000%d_abcd", i)
  local dir = synthetic.write(out .. "/many/" .. id)
  local s = kagent.json.decode(assert(fs.read(dir .. "/summary.json")))
  s.run_id, s.best_ms, s.speedup_vs_input = id, best, 3.5 / best
  fs.write(dir .. "/summary.json", kagent.json.encode(s))
  assert(report.run_page(dir))
end
assert(report.runs_index(out .. "/many"))
print(run)
return 0
