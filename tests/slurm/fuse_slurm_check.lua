-- The Slurm half of the Levels 2 and 3 sweep test, run by tests/slurm/fuse_slurm_test.sh once
-- its own slurmctld and slurmd are up (SLURM_CONF points at them): agents/sweep.lua --policy fuse
-- with no LLM (-- --no-llm) over two small CPU problems as a job array. Checks: each row says
-- route, subgraphs, a valid decomposition and a verified first program (the CPU stand-in: the
-- reference's ops); the fuse table and its aggregates are written; a second run of the same
-- command resumes and launches nothing.
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs, json = kagent.fs, kagent.json
local sweep = require("sweep_session")

local work = assert(os.getenv("KAGENT_SLURM_TEST_DIR"), "run by tests/slurm/fuse_slurm_test.sh")

describe("agents/sweep.lua --policy fuse --slurm, no LLM", function()
  it("runs the LLM-free path of each problem as an array task, writes a row for each and resumes", function()
    local env = { KAGENT_PYTHON = spec.python, KAGENT_DB = false, KAGENT_LLM_DB = false, KAGENT_SWEEP_HEARTBEAT = "1",
      KAGENT_PROGRESS = "lines" }
    local list = work .. "/problems.txt"
    fs.write(list, kagent.root .. "/examples/problems/l3_mlp_small.py\n" .. kagent.root .. "/examples/problems/l2_conv_bn_relu_small.py\n")
    local out = work .. "/fuse"
    local argv = { "--problems", list, "--policy", "fuse", "--devices", "cpu", "--out", out, "--db", work .. "/fuse.db",
      "--slurm", "--array-limit", "2", "--cpus-per-task", "1", "--poll", "1", "--", "--no-llm" }
    local r = sweep.spawn_sweep(argv, env):wait(800)
    expect.eq(r.code, 0, "sweep exit " .. tostring(r.code) .. "\n" .. tostring(r.stderr):sub(-3000))
    local s = json.decode(assert(fs.read(out .. "/sweep.json")))
    expect.eq(s.mode, "slurm")
    expect.eq(#s.results, 2)
    for _, row in ipairs(s.results) do
      local f = row.fuse
      expect.truthy(f, row.name .. ": a fuse row")
      expect.eq(f.route, "decompose", row.name)
      expect.eq(f.decomposition, "valid", row.name)
      expect.truthy(f.subgraphs >= 1, row.name .. ": subgraphs")
      expect.eq(f.first_verified, true, row.name .. ": " .. tostring(f.first_stage) .. " " .. tostring(f.first_reason))
      expect.eq(f.first_sources, "reference", row.name .. ": the CPU stand-in")
      expect.truthy(type(f.first_speedup.eager) == "number", row.name .. ": timed against eager")
      expect.match(tostring(row.log), "/logs/")
    end
    expect.eq(s.fuse_aggregate.first_verified, 2)
    expect.eq(s.fuse_aggregate.decomposed, 2)
    local tbl = assert(fs.read(out .. "/table.md"))
    expect.match(tbl, "| problem | route | subgraphs | decomposition | first program")
    expect.match(tbl, "decomposed 2/2; first programs verified 2/2")

    -- the same command again: both problems are finished, nothing is launched
    local before = {}
    for _, row in ipairs(s.results) do before[row.name] = sweep.record(out, row.name).launches end
    local r2 = sweep.spawn_sweep(argv, env):wait(300)
    expect.eq(r2.code, 0, tostring(r2.stderr):sub(-2000))
    expect.match(r2.stderr, "resumed: 2 finished before")
    for name, launches in pairs(before) do
      expect.eq(#sweep.record(out, name).launches, #launches, name .. ": no new launch")
    end
  end, { timeout = 850 })
end)
