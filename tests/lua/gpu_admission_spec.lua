-- GPU memory admission (kagent.gpu.admission through the pool), without GPUs: a FAKE nvidia-smi
-- (tests/fixtures/fake_nvidia_smi) lists the GPUs and FAKE workers
-- (tests/fixtures/fake_worker/fake_worker.py, started through a KAGENT_PYTHON wrapper) report a
-- FAKE total of 100 GiB, each job's FAKE reference peak, and fail as a CUDA allocation does when
-- told to. Checked by the order of the jobs' starts and ends, never by their speed: a problem's
-- first job runs alone, and then no more jobs run at once than fit; a job that ran out of memory
-- beside another runs again alone and is accepted; one that ran out alone is EMEMORY with sizes.
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs, json, proc = kagent.fs, kagent.json, kagent.proc
local fake_session = require("fake_session")

local SMI = spec.root .. "/tests/fixtures/fake_nvidia_smi/nvidia-smi"
local FIX = spec.root .. "/tests/fixtures/fake_worker"
local BIN = os.getenv("KAGENT_BIN") or "/proc/self/exe"
local GIB = 2 ^ 30
local TOTAL = 100 * GIB  -- the FAKE GPU's memory; 90 GiB of it usable (admission.USABLE_SHARE)

local bin
local function setup()
  if bin then return bin end
  bin = spec.tmpdir("fake-admission")
  assert(fs.write(bin .. "/nvidia-smi", assert(fs.read(SMI))))
  assert(proc.run({ "chmod", "+x", bin .. "/nvidia-smi" }, { timeout = 10 }).code == 0)
  fake_session.python_wrapper(bin, string.format('exec "%s" "%s/fake_worker.py" --gpu-memory-bytes %d "$@"',
    spec.python, FIX, TOTAL))
  return bin
end

-- run(workers, jobs) -> the jobs' results (fixture admission.lua), on one FAKE GPU
local function run(workers, jobs)
  local dir = setup()
  local running = spec.tmpdir("fake-running")
  local cfg = json.encode({ devices = { 0 }, workers = workers, jobs = jobs, fake_running = running })
  local r = assert(proc.run({ BIN, "--env-file", "/dev/null", FIX .. "/admission.lua", cfg }, { cwd = spec.root,
    timeout = 180, env = { PATH = dir .. ":" .. os.getenv("PATH"), CUDA_VISIBLE_DEVICES = false,
      KAGENT_PYTHON = dir .. "/python" } }))
  expect.eq(r.code, 0, "admission.lua: " .. r.stdout .. r.stderr)
  local out = json.decode(r.stdout:match("([^\n]+)\n*$") or "")
  expect.truthy(type(out) == "table", r.stdout .. r.stderr)
  return out.jobs
end

-- the most jobs that ran at once, by their starts and ends
local function most_at_once(jobs)
  local most = 0
  for _, a in ipairs(jobs) do
    local n = 0
    for _, b in ipairs(jobs) do
      if b.start <= a.start and a.start < b["end"] then n = n + 1 end
    end
    most = math.max(most, n)
  end
  return most
end

local function overlaps(a, b) return a.start < b["end"] and b.start < a["end"] end

describe("GPU memory admission with FAKE workers and a FAKE 100 GiB GPU", function()
  it("runs a problem's first job alone, then no more jobs at once than fit (2 of 4 workers)", function()
    -- reference peak 10 GiB: footprint 40 GiB (4 x), 2 fit in 90 GiB usable
    local jobs = {}
    for i = 1, 7 do jobs[i] = { candidate = 0.3, fake_peak_bytes = 10 * GIB, fake_meet = true } end
    local out = run(4, jobs)
    for i, j in ipairs(out) do expect.truthy(j.ok, "job " .. i .. ": " .. tostring(j.error)) end
    expect.eq(most_at_once(out), 2, "never more than 2 at once, and 2 did run at once: " .. json.encode(out))
    local first
    for _, j in ipairs(out) do
      if j.admission.alone then
        expect.eq(first, nil, "one job ran alone: " .. json.encode(out))
        first = j
      end
    end
    expect.truthy(first, "the problem's first job ran alone, its peak unknown: " .. json.encode(out))
    expect.eq(first.budget, nil, "a job alone gets no budget")
    for _, j in ipairs(out) do
      if j ~= first then
        expect.truthy(not overlaps(first, j), "nothing ran beside the first job: " .. json.encode(out))
        expect.truthy(j.start >= first["end"], "the others waited for its peak: " .. json.encode(out))
        expect.eq(j.admission.footprint_bytes, 40 * GIB)
        expect.eq(j.admission.reserved_bytes, 40 * GIB)
        expect.eq(j.budget, 40 * GIB, "the worker is told its budget")
        expect.eq(j.admission.jobs_at_once, 2, "min(4 workers, floor(90 GiB / 40 GiB))")
      end
    end
  end, { timeout = 240 })

  it("reserves an equal share of the GPU for a small problem: 4 jobs at once on 4 workers", function()
    local jobs = {}
    for i = 1, 5 do jobs[i] = { candidate = 0.1, fake_peak_bytes = 1 * GIB } end
    local out = run(4, jobs)
    for i, j in ipairs(out) do expect.truthy(j.ok, "job " .. i .. ": " .. tostring(j.error)) end
    -- 4 GiB footprint, 22.5 GiB each (an equal share of the usable memory among 4 workers)
    expect.eq(out[2].admission.reserved_bytes, math.floor(90 * GIB / 4))
    expect.eq(out[2].admission.jobs_at_once, 4)
  end, { timeout = 240 })

  it("runs a job that ran out of GPU memory beside another again alone, and accepts it", function()
    local out = run(2, {
      { candidate = 0.1, fake_peak_bytes = 1 * GIB },  -- the problem's first: its peak learned
      { candidate = 0.3, fake_peak_bytes = 1 * GIB, fake_oom = "beside", fake_meet = true, at = 0.05 },
      { candidate = 0.3, fake_peak_bytes = 1 * GIB, fake_meet = true, at = 0.05 },
    })
    local b = out[2]
    expect.truthy(b.ok, "the job run again alone passed: " .. json.encode(b))
    expect.truthy(out[3].ok, tostring(out[3].error))
    expect.truthy(type(b.rerun_alone) == "table", "its first run is kept: " .. json.encode(b))
    expect.match(b.rerun_alone.error, "CUDA out of memory")
    expect.eq(b.rerun_alone.admission.shared, true)
    expect.eq(b.admission.alone, true, "the second run was admitted alone")
    expect.eq(b.admission.shared, false)
    expect.eq(b.beside, false, "and nothing ran beside it")
    expect.truthy(not overlaps(b, out[3]), "the other job had ended: " .. json.encode(out))
  end, { timeout = 240 })

  it("makes an out-of-memory error alone on the GPU EMEMORY, with the sizes, never ERUN", function()
    local out = run(2, {
      { candidate = 0.1, fake_oom = "always" },  -- alone: its problem's peak is unknown
      { candidate = 0.1, fake_peak_bytes = 1 * GIB, problem = "fake2" },
      -- beside another job first, then alone: out of memory both times
      { candidate = 0.2, fake_peak_bytes = 1 * GIB, problem = "fake2", fake_oom = "always", fake_meet = true, at = 0.3 },
      { candidate = 0.2, fake_peak_bytes = 1 * GIB, problem = "fake2", fake_meet = true, at = 0.3 },
    })
    for _, k in ipairs({ 1, 3 }) do
      local j = out[k]
      expect.eq(j.ok, false)
      expect.eq(j.code, "EMEMORY", "job " .. k .. ": " .. json.encode(j))
      expect.match(j.error, "^EMEMORY: the kernel ran out of GPU memory with the GPU to itself")
      expect.match(j.error, "tried to allocate 8%.00 GiB, 5%.36 GiB free of 79%.19 GiB total")
      expect.eq(j.out_of_memory.tried_bytes, 8 * GIB)
    end
    expect.eq(out[1].rerun_alone, nil, "alone from the start: not run again")
    expect.truthy(type(out[3].rerun_alone) == "table", "beside another first: run again alone, then EMEMORY")
    expect.truthy(out[2].ok and out[4].ok)
  end, { timeout = 240 })
end)
