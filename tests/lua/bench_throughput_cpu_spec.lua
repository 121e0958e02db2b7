-- bench/throughput.lua in CPU mode with tiny counts: the table has the 1-worker and the pipelined
-- row with figures above zero, the control's lines, and the line that says these are not GPU
-- figures; each configuration's row as soon as it ran, and the JSON of every configuration.
-- Needs KAGENT_PYTHON with torch. Asserts the report's shape and that the jobs ran, never speed
-- (two shared cores).
local proc, fs, json = kagent.proc, kagent.fs, kagent.json

local function need_torch()
  local r = proc.run({ spec.python, "-c", "import torch" }, { timeout = 60 })
  if not (r and r.code == 0) then skip(spec.python .. " has no torch") end
end

describe("bench/throughput.lua --devices cpu", function()
  it("prints both rows with numbers > 0, each as its configuration ends, the control's medians and the JSON", function()
    need_torch()
    local out = spec.tmpdir("throughput") .. "/tp.json"
    local r = assert(proc.run({ spec.build_dir .. "/kagent-rt", "--log-level", "warn", "bench/throughput.lua",
      "--devices", "cpu", "--candidates", "4", "--workers", "2", "--json", out }, { timeout = 280, cwd = spec.root }))
    expect.eq(r.code, 0, r.stdout .. r.stderr)
    expect.match(r.stdout, "CPU MODE: .*NOT GPU figures")
    local rows = {}
    local line = "\ncpu +(%d+) +([%d.]+) +(%d+) +(%d+) +([%d.]+) +([%d.]+) +[%d.]+ +[%d.]+ +([%d.]+) +([%d.]+)"
    for workers, start, jobs, ok, wall, per_min, job_s, cpu_s in r.stdout:gmatch(line) do
      rows[#rows + 1] = { workers = tonumber(workers), start = tonumber(start), jobs = tonumber(jobs),
        ok = tonumber(ok), wall = tonumber(wall), per_min = tonumber(per_min), job_s = tonumber(job_s),
        cpu_s = tonumber(cpu_s) }
    end
    expect.eq(#rows, 2, r.stdout)
    expect.eq(rows[1].workers, 1); expect.eq(rows[2].workers, 2)
    for _, row in ipairs(rows) do
      expect.eq(row.jobs, 7, "4 variants and 3 controls")
      expect.eq(row.ok, 7)
      expect.truthy(row.wall > 0 and row.per_min > 0, r.stdout)
      expect.truthy(row.start > 0, "the warm-up before the batch is reported apart: " .. r.stdout)
      -- each job's median time and CPU time (its candidate's process and its worker)
      expect.truthy(row.job_s > 0 and row.cpu_s > 0, r.stdout)
    end
    -- each row came first in the progress, once its configuration ran (a run cut off keeps them)
    local progress = {}
    for workers in r.stderr:gmatch("\n  cpu +(%d+) +[%d.]+ +7 +7 ") do progress[#progress + 1] = tonumber(workers) end
    expect.same(progress, { 1, 2 }, r.stderr)
    local dump = json.decode(assert(fs.read(out)))
    expect.eq(dump.complete, true)
    expect.eq(#dump.configs, 2)
    for i, c in ipairs(dump.configs) do
      expect.eq(c.workers, rows[i].workers)
      expect.eq(#c.results, 7)
    end
    expect.match(r.stdout, "pipelined / 1 worker, cpu: [%d.]+x")
    local alone = tonumber(r.stdout:match("control alone %(1 worker, cpu%) +median ([%d.]+) ms"))
    expect.truthy(alone and alone > 0, r.stdout)
    for _, w in ipairs({ 1, 2 }) do
      local m, n = r.stdout:match("control in the batch, cpu ×" .. w .. " +median ([%d.]+) ms %(p10 [%d.]+, p90 [%d.]+; (%d) runs%)")
      expect.truthy(m and tonumber(m) > 0 and tonumber(n) == 3, r.stdout)
    end
  end)
end)
