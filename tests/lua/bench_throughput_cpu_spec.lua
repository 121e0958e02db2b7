-- bench/throughput.lua in CPU mode with tiny counts: the table has the 1-worker and the pipelined
-- row with figures above zero, the control's lines, and the line that says these are not GPU
-- figures. Needs KAGENT_PYTHON with torch. Asserts the report's shape and that the jobs ran,
-- never speed (two shared cores).
local proc = kagent.proc

local function need_torch()
  local r = proc.run({ spec.python, "-c", "import torch" }, { timeout = 60 })
  if not (r and r.code == 0) then skip(spec.python .. " has no torch") end
end

describe("bench/throughput.lua --devices cpu", function()
  it("prints both rows of the table with numbers > 0 and the control's medians", function()
    need_torch()
    local r = assert(proc.run({ spec.build_dir .. "/kagent-rt", "--log-level", "warn", "bench/throughput.lua",
      "--devices", "cpu", "--candidates", "4", "--workers", "2" }, { timeout = 280, cwd = spec.root }))
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
    expect.match(r.stdout, "pipelined / 1 worker, cpu: [%d.]+x")
    local alone = tonumber(r.stdout:match("control alone %(1 worker, cpu%) +median ([%d.]+) ms"))
    expect.truthy(alone and alone > 0, r.stdout)
    for _, w in ipairs({ 1, 2 }) do
      local m, n = r.stdout:match("control in the batch, cpu ×" .. w .. " +median ([%d.]+) ms %(p10 [%d.]+, p90 [%d.]+; (%d) runs%)")
      expect.truthy(m and tonumber(m) > 0 and tonumber(n) == 3, r.stdout)
    end
  end)
end)
