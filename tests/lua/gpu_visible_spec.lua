-- GPU selection without GPUs: a FAKE nvidia-smi (tests/fixtures/fake_nvidia_smi) lists 8 GPUs
-- with UUIDs (and two MIG devices on the last); child kagent-rt processes run with it first on
-- PATH and a CUDA_VISIBLE_DEVICES of each case. Checked: kagent.gpu.gpus() (the GPUs this process
-- may use, read from the mask as CUDA reads it), the agents' --devices (all, positions, an index
-- past the list), and an evaluator pool that gives its worker the physical GPU and stamps results
-- with it. tests/gpu/devices_gpu_check.sh does the same on a real GPU.
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs, json, proc = kagent.fs, kagent.json, kagent.proc
local cpu = require("fake_session").cpu()

local FIX = spec.root .. "/tests/fixtures/fake_nvidia_smi"
local BIN = os.getenv("KAGENT_BIN") or "/proc/self/exe"
local H100 = "NVIDIA H100 80GB HBM3"
local function uuid(i) return string.format("GPU-fa4e000%d-0000-4000-8000-00000000000%d", i, i) end

-- A folder holding a copy of the fake nvidia-smi (and its calls.log), to put first on PATH.
local function fake_bin()
  local dir = spec.tmpdir("fake-smi")
  assert(fs.write(dir .. "/nvidia-smi", assert(fs.read(FIX .. "/nvidia-smi"))))
  assert(proc.run({ "chmod", "+x", dir .. "/nvidia-smi" }, { timeout = 10 }).code == 0)
  return dir
end

local bin
-- run(script, args, mask, extra_env) -> decoded JSON line of a fixture script run by kagent-rt
-- with the fake first on PATH; mask nil leaves CUDA_VISIBLE_DEVICES unset
local function run(script, args, mask, extra)
  bin = bin or fake_bin()
  local env = { PATH = bin .. ":" .. os.getenv("PATH"), CUDA_VISIBLE_DEVICES = mask or false,
    KAGENT_PYTHON = spec.python }
  for k, v in pairs(extra or {}) do env[k] = v end
  local argv = { BIN, "--env-file", "/dev/null", FIX .. "/" .. script }
  for _, a in ipairs(args or {}) do argv[#argv + 1] = a end
  local r = assert(proc.run(argv, { cwd = spec.root, env = env, timeout = 180 }))
  expect.eq(r.code, 0, script .. " exit status; stderr: " .. r.stderr)
  local out = json.decode(r.stdout:match("([^\n]+)\n*$") or "")
  expect.truthy(type(out) == "table", "a JSON line from " .. script .. ": " .. r.stdout .. r.stderr)
  out.stderr = r.stderr
  return out
end

local function gpus(mask, extra) return run("probe.lua", nil, mask, extra).gpus end

-- the nvidia-smi indices of a gpus() list
local function indices(list)
  local out = {}
  for i, g in ipairs(list) do out[i] = g.index end
  return out
end

describe("kagent.gpu.gpus() with a fake nvidia-smi", function()
  it("lists every GPU when CUDA_VISIBLE_DEVICES is unset", function()
    local list = gpus(nil)
    expect.same(indices(list), { 0, 1, 2, 3, 4, 5, 6, 7 })
    for i, g in ipairs(list) do
      expect.eq(g.uuid, uuid(i - 1))
      expect.eq(g.name, H100)
      expect.eq(g.mig, false)
      expect.eq(g.visible, uuid(i - 1), "a worker's mask names the GPU by UUID")
    end
  end)

  it("keeps to the mask: 4,5 are the physical GPUs 4 and 5, in the mask's order", function()
    local list = gpus("4,5")
    expect.same(indices(list), { 4, 5 })
    expect.eq(list[2].uuid, uuid(5))
    expect.eq(list[2].visible, uuid(5))
    expect.same(indices(gpus("5,2")), { 5, 2 })
    expect.same(indices(gpus(" 3 , 1 ")), { 3, 1 }, "spaces around entries")
  end)

  it("reads UUIDs, unique UUID prefixes and MIG UUIDs", function()
    expect.same(indices(gpus(uuid(6) .. "," .. "GPU-fa4e0002")), { 6, 2 })
    local mig = gpus("MIG-7b1e0001")
    expect.eq(#mig, 1)
    expect.eq(mig[1].index, 7, "its GPU's index")
    expect.eq(mig[1].mig, true)
    expect.eq(mig[1].uuid, "MIG-7b1e0001-0000-4000-8000-000000000001")
    expect.eq(mig[1].visible, mig[1].uuid)
    expect.eq(mig[1].name, H100 .. " MIG 1g.10gb")
  end)

  it("allows none for an empty mask or -1", function()
    expect.eq(#gpus(""), 0)
    expect.eq(#gpus("-1"), 0)
  end)

  it("stops at the first entry that names no GPU, as CUDA does", function()
    for _, mask in ipairs({ "4,-1,5", "4,9,5", "4,GPU-fa4e,5", "4,4,5", "4,x,5", "4,,5", "4,MIG-0000,5" }) do
      expect.same(indices(gpus(mask)), { 4 }, mask)
    end
    expect.eq(#gpus("GPU-fa4e"), 0, "an ambiguous prefix")
  end)

  it("finds none when nvidia-smi fails, whatever the mask", function()
    expect.eq(#gpus(nil, { FAKE_NVIDIA_SMI_FAIL = "1" }), 0)
    expect.eq(#gpus("0", { FAKE_NVIDIA_SMI_FAIL = "1" }), 0)
  end)
end)

describe("--devices against the GPUs this process may use", function()
  it("all: every allowed GPU, as pool positions", function()
    expect.same(run("probe.lua", { "all" }, nil).devices, { 0, 1, 2, 3, 4, 5, 6, 7 })
    expect.same(run("probe.lua", { "all" }, "4,5").devices, { 0, 1 })
  end)

  it("indices are positions in the allowed list", function()
    expect.same(run("probe.lua", { "1" }, "4,5").devices, { 1 })
    expect.same(run("probe.lua", { "0,7" }, nil).devices, { 0, 7 })
  end)

  it("an index past the allowed list is refused, naming the allowed GPUs", function()
    local out = run("probe.lua", { "0,2" }, "4,5")
    expect.eq(out.devices, nil)
    expect.eq(out.error, "probe: --devices 0,2: there is no GPU 2 here (the GPUs this process may use: "
      .. "0 = GPU 4 " .. H100 .. ", 1 = GPU 5 " .. H100 .. "; CUDA_VISIBLE_DEVICES=4,5)")
    out = run("probe.lua", { "all" }, "")
    expect.eq(out.error, "probe: --devices all: there is no GPU here (CUDA_VISIBLE_DEVICES='' allows none; use --devices cpu)")
    out = run("probe.lua", { "0" }, "MIG-7b1e0000")
    expect.same(out.devices, { 0 })
    out = run("probe.lua", { "1" }, "MIG-7b1e0000")
    expect.match(out.error, "0 = MIG%-7b1e0000%-0000%-4000%-8000%-000000000000 " .. H100 .. " MIG 1g.10gb; CUDA_VISIBLE_DEVICES=MIG%-7b1e0000%)$")
  end)

  it("the agent refuses an index past the mask before any worker starts (exit 2, one line)", function()
    bin = bin or fake_bin()
    local dir = spec.tmpdir("devices-agent")
    local r = assert(proc.run({ BIN, "--env-file", "/dev/null", spec.root .. "/agents/tune.lua", "--problem",
      cpu.problem, "--kernel", cpu.fx .. "slow.py", "--devices", "2", "--out", dir .. "/runs" },
      { cwd = spec.root, timeout = 120, env = { PATH = bin .. ":" .. os.getenv("PATH"), CUDA_VISIBLE_DEVICES = "4,5",
        KAGENT_DB = dir .. "/mem.db", KAGENT_PYTHON = spec.python } }))
    expect.eq(r.code, 2, r.stderr)
    expect.match(r.stderr, "^agents/tune%.lua: %-%-devices 2: there is no GPU 2 here %(the GPUs this process may use: 0 = GPU 4 ")
    expect.eq(select(2, r.stderr:gsub("\n", "")), 1, "one line: " .. r.stderr)
    expect.falsy(fs.exists(dir .. "/runs"), "no run folder")
  end)

  it("agents accept --devices all", function()
    local parsed, err = require("agents.run.args").parse({ "--problem", "p.py", "--devices", "all" },
      require("agents.run.options"))
    expect.truthy(parsed, err)
    expect.eq(parsed.devices, "all")
  end)
end)

describe("an evaluator pool under a mask", function()
  local function need_torch()
    if not cpu.have_torch() then skip(spec.python .. " has no torch") end
  end

  it("gives pool device 1 of CUDA_VISIBLE_DEVICES=4,5 the physical GPU 5, and its results say so", function()
    need_torch()
    bin = bin or fake_bin()
    local log = bin .. "/calls.log"
    assert(fs.write(log, ""))
    local out = run("pool.lua", { "1" }, "4,5")
    expect.truthy(out.devices, "the worker started: " .. tostring(out.error) .. out.stderr)
    local d = out.devices[1]
    expect.eq(d.device, 1)
    expect.eq(d.mode, "cuda")
    expect.eq(d.gpu.index, 5)
    expect.eq(d.gpu.uuid, uuid(5))
    expect.eq(d.gpu_name, H100, "the worker's own nvidia-smi query")
    -- the worker asked nvidia-smi about its GPU with its own mask set: that mask is GPU 5's
    local calls = assert(fs.read(log))
    expect.truthy(calls:find("CUDA_VISIBLE_DEVICES=" .. uuid(5) .. " --query-gpu=name", 1, true), calls)
    expect.no_match(calls, "CUDA_VISIBLE_DEVICES=4,5 --query-gpu", "the inherited mask was replaced")
    local r = out.result
    expect.eq(r.device, 1, "the pool device that ran the job")
    expect.eq(r.gpu.index, 5)
    expect.eq(r.gpu.uuid, uuid(5))
    expect.eq(r.gpu.name, H100)
    expect.eq(r.gpu.visible, uuid(5))
  end, { timeout = 240 })

  it("starts no worker for a pool device past the mask", function()
    local out = run("pool.lua", { "2" }, "4,5")
    expect.eq(out.devices, nil)
    expect.match(out.error, "there is no GPU 2 among the 2 this process may use")
  end, { timeout = 240 })
end)
