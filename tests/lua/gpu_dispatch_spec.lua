-- Least-loaded dispatch over several GPUs (kagent.gpu's pool:_acquire), without GPUs: a FAKE
-- nvidia-smi (tests/fixtures/fake_nvidia_smi) lists the GPUs and FAKE workers
-- (tests/fixtures/fake_worker/fake_worker.py, started through a KAGENT_PYTHON wrapper) answer
-- each job after the seconds it names, saying when it ran. Checked: two jobs sent together go to
-- two GPUs whatever the workers per GPU, the load stays balanced, and a job that had to wait
-- takes the first device that frees rather than one chosen when it arrived.
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs, json, proc = kagent.fs, kagent.json, kagent.proc
local fake_session = require("fake_session")

local SMI = spec.root .. "/tests/fixtures/fake_nvidia_smi/nvidia-smi"
local FIX = spec.root .. "/tests/fixtures/fake_worker"
local BIN = os.getenv("KAGENT_BIN") or "/proc/self/exe"

local bin
local function setup()
  if bin then return bin end
  bin = spec.tmpdir("fake-dispatch")
  assert(fs.write(bin .. "/nvidia-smi", assert(fs.read(SMI))))
  assert(proc.run({ "chmod", "+x", bin .. "/nvidia-smi" }, { timeout = 10 }).code == 0)
  fake_session.python_wrapper(bin, string.format('exec "%s" "%s/fake_worker.py" "$@"', spec.python, FIX))
  return bin
end

-- dispatch(devices, wpg, jobs...) -> the jobs' {device, start, end} (fixture dispatch.lua)
local function dispatch(devices, wpg, ...)
  local dir = setup()
  local argv = { BIN, "--env-file", "/dev/null", FIX .. "/dispatch.lua", devices, tostring(wpg), ... }
  local r = assert(proc.run(argv, { cwd = spec.root, timeout = 120, env = {
    PATH = dir .. ":" .. os.getenv("PATH"), CUDA_VISIBLE_DEVICES = false, KAGENT_PYTHON = dir .. "/python" } }))
  expect.eq(r.code, 0, "dispatch.lua: " .. r.stdout .. r.stderr)
  local out = json.decode(r.stdout:match("([^\n]+)\n*$") or "")
  expect.truthy(type(out) == "table", r.stdout .. r.stderr)
  for i, j in ipairs(out.jobs) do expect.truthy(j.ok, "job " .. i .. ": " .. tostring(j.error)) end
  return out.jobs
end

local function per_device(jobs)
  local n = {}
  for _, j in ipairs(jobs) do n[j.device] = (n[j.device] or 0) + 1 end
  return n
end

describe("pool dispatch over two FAKE GPUs", function()
  it("sends two concurrent jobs to different GPUs with 1 and with 2 workers per GPU", function()
    for _, wpg in ipairs({ 1, 2 }) do
      local jobs = dispatch("0,1", wpg, "0.5", "0.5")
      expect.eq(jobs[1].device, 0, "workers_per_gpu " .. wpg .. ": ties go to the lowest device")
      expect.eq(jobs[2].device, 1, "workers_per_gpu " .. wpg .. ": the second job takes the idle GPU")
      expect.truthy(jobs[2].start < jobs[1]["end"], "the two ran at once")
      expect.eq(jobs[1].worker_device ~= jobs[2].worker_device, true, "two workers of two GPUs")
    end
  end, { timeout = 240 })

  it("balances the load with workers_per_gpu = 2", function()
    local jobs = dispatch("0,1", 2, "0.6", "0.6", "0.6")
    expect.same({ jobs[1].device, jobs[2].device, jobs[3].device }, { 0, 1, 0 })
    jobs = dispatch("0,1", 2, "0.4", "0.4", "0.4", "0.4", "0.4", "0.4")
    -- the first four fill both GPUs two by two; the last two take whichever workers free first
    local first = {}
    for i = 1, 4 do first[i] = jobs[i].device end
    expect.same(first, { 0, 1, 0, 1 })
    local n = per_device(jobs)
    expect.truthy(n[0] >= 2 and n[1] >= 2 and n[0] + n[1] == 6, json.encode(jobs))
  end, { timeout = 240 })

  it("gives a waiting job to the first GPU that frees, not one chosen when it arrived", function()
    -- GPU 0 runs a long job, GPU 1 a short one; the third waits for either and must take GPU 1
    -- as soon as its job ends, long before GPU 0's
    local jobs = dispatch("0,1", 1, "3", "0.3", "+0.1", "0.3")
    expect.eq(jobs[1].device, 0)
    expect.eq(jobs[2].device, 1)
    expect.eq(jobs[3].device, 1, "the job that waited went to the GPU that freed")
    expect.truthy(jobs[3]["end"] < jobs[1]["end"], "it ran while GPU 0 was still busy: " .. json.encode(jobs))
  end, { timeout = 240 })

  it("keeps a pinned job on its device even when another is idle", function()
    local jobs = dispatch("0,1", 1, "0.5@1", "0.3@1")
    expect.eq(jobs[1].device, 1)
    expect.eq(jobs[2].device, 1)
    expect.truthy(jobs[2].start >= jobs[1]["end"] - 0.05, "the second waited for device 1")
  end, { timeout = 240 })
end)
