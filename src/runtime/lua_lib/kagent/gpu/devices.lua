-- kagent.gpu, the devices: the GPUs this process may use (nvidia-smi's list read through
-- CUDA_VISIBLE_DEVICES, as CUDA reads it) and how many workers this host can feed per GPU.
local proc = require("kagent.proc")
local fs = require("kagent.fs")

local M = {}

-- The automatic number of workers per GPU (a pool's workers_per_gpu = "auto"): each worker
-- keeps about one core busy compiling (Triton, Inductor) while it prepares its candidate process,
-- and holds a torch process and a candidate with its inputs in host memory; more than MAX adds
-- little, since every timed stage waits for the GPU's exclusive lease. CPU mode keeps 1 (there
-- the workers' own stages compete for the same cores the timing measures).
M.AUTO_WORKERS = { cores_per_worker = 4, memory_gib_per_worker = 8, max = 4 }

-- the cores this process may run on (sched affinity: a Slurm job's share) and the host memory it
-- may use (MemTotal, or a smaller cgroup v2 limit)
local function host_cores()
  local r = proc.run({ "nproc" }, { timeout = 10 })
  return r and r.code == 0 and tonumber((r.stdout:gsub("%s+", ""))) or 1
end

local function host_memory()
  local kib = tonumber((fs.read("/proc/meminfo") or ""):match("MemTotal:%s*(%d+)"))
  local bytes = kib and kib * 1024 or 0
  local limit = tonumber(((fs.read("/sys/fs/cgroup/memory.max")) or ""):match("^%s*(%d+)"))
  if limit and (bytes == 0 or limit < bytes) then bytes = limit end
  return bytes
end

--- auto_workers_per_gpu({cores, memory_bytes, gpus}) ⏸ -> {workers, cores, memory_bytes, gpus, rule}.
--- Fields not given are read from this host (cores: nproc; memory: /proc/meminfo and the cgroup's
--- limit; gpus: #gpu.gpus()). See docs/lua-api.md.
function M.auto_workers_per_gpu(o)
  o = o or {}
  local a = M.AUTO_WORKERS
  local cores = o.cores or host_cores()
  local mem = o.memory_bytes or host_memory()
  local gpus = math.max(1, o.gpus or #M.gpus())
  local gib_per_gpu = mem / gpus / 2 ^ 30
  local by_cores = math.floor(cores / gpus / a.cores_per_worker)
  local by_mem = math.floor(gib_per_gpu / a.memory_gib_per_worker)
  local n = math.max(1, math.min(by_cores, by_mem, a.max))
  return { workers = n, cores = cores, memory_bytes = mem, gpus = gpus,
    rule = string.format("min(%g cores per GPU / %d, %.0f GiB per GPU / %d, %d)", cores / gpus,
      a.cores_per_worker, gib_per_gpu, a.memory_gib_per_worker, a.max) }
end

-- What `nvidia-smi -L` lists: the GPUs ({index, uuid, name}) and the MIG devices of MIG-enabled
-- ones ({index = their GPU's, uuid = "MIG-...", name = "<GPU name> MIG <profile>", mig = true}).
local function smi_list()
  local r = proc.run({ "nvidia-smi", "-L" }, { timeout = 30 })
  local gpus, migs = {}, {}
  if not (r and r.code == 0) then return gpus, migs end
  local parent
  for line in tostring(r.stdout):gmatch("[^\n]+") do
    local idx, rest = line:match("^GPU (%d+): (.*)$")
    if idx then
      local name, uuid = rest:match("^(.-)%s*%(UUID: ([^%)]+)%)")
      parent = { index = tonumber(idx), name = name or rest, uuid = uuid }
      gpus[#gpus + 1] = parent
    else
      local profile, uuid = line:match("^%s+MIG (%S+)%s+Device%s+%d+: %(UUID: ([^%)]+)%)")
      if profile and parent then
        migs[#migs + 1] = { index = parent.index, uuid = uuid, name = parent.name .. " MIG " .. profile, mig = true }
      end
    end
  end
  return gpus, migs
end

-- The device a CUDA_VISIBLE_DEVICES entry names, or nil when CUDA would find it invalid: a
-- nvidia-smi index, or a GPU-/MIG- UUID or a prefix of one that names a single device.
local function mask_entry(item, gpus, migs)
  if item:match("^%d+$") then
    for _, g in ipairs(gpus) do if g.index == tonumber(item) then return g end end
    return nil
  end
  if not (item:match("^GPU%-.") or item:match("^MIG%-.")) then return nil end
  local found
  for _, list in ipairs({ gpus, migs }) do
    for _, g in ipairs(list) do
      if g.uuid and g.uuid:sub(1, #item) == item then
        if found then return nil end  -- an ambiguous prefix names no device
        found = g
      end
    end
  end
  return found
end

--- gpus() ⏸ -> the GPUs this process may use, in the order of a pool's device numbers (0, 1, ...):
--- array of {index, uuid, name, mig, visible}. See docs/lua-api.md.
function M.gpus()
  local gpus, migs = smi_list()
  local mask = os.getenv("CUDA_VISIBLE_DEVICES")
  local allowed
  if mask == nil then
    allowed = gpus
  else
    -- CUDA's reading: entries in order; the first invalid one (-1, an unknown index or UUID, one
    -- named before) ends the list, so "" and "-1" allow none
    allowed = {}
    local seen = {}
    for item in (mask .. ","):gmatch("([^,]*),") do
      local g = mask_entry(item:match("^%s*(.-)%s*$"), gpus, migs)
      if not g or seen[g] then break end
      seen[g] = true
      allowed[#allowed + 1] = g
    end
  end
  local out = {}
  for i, g in ipairs(allowed) do
    -- a worker's mask names the device by UUID: the same device for CUDA whatever its
    -- CUDA_DEVICE_ORDER, and for nvidia-smi
    out[i] = { index = g.index, uuid = g.uuid, name = g.name, mig = g.mig or false,
      visible = g.uuid or tostring(g.index) }
  end
  return out
end

-- A copy of a gpus() entry for a result (a caller may change what it gets).
function M.record(g)
  return g and { index = g.index, uuid = g.uuid, name = g.name, mig = g.mig, visible = g.visible }
end

return M
