-- The run directory: runs/<run_id>/ with KernelAgent's published trace layout (DESIGN §7), so
-- existing trace readers work on our runs. Every write is atomic (kagent.fs.write); one that
-- fails is recorded in rd.writes (agents/run/writes.lua), which stops the run.
local fs = require("kagent.fs")
local json = require("kagent.json")
local writes = require("agents.run.writes")

local M = {}
M.__index = M

-- new_id(problem_path) -> "<problem stem>_<UTC yyyymmdd-HHMMSS>_<4 hex>"
function M.new_id(problem)
  local stem = (problem or "run"):match("([^/]+)$"):gsub("%.py$", ""):gsub("[^%w_%-]", "_")
  local wall = require("kagent.time").wall()
  return string.format("%s_%s_%04x", stem, os.date("!%Y%m%d-%H%M%S", math.floor(wall)),
    math.floor((wall % 1) * 65536))
end

-- One process per run: the process that works on a run holds an exclusive lock on the run
-- folder's LOCK file (kagent.fs.lock, which writes its pid there) from the start, or from a
-- --resume's first step (agents/search/startup.lua), until it ends; the kernel drops the lock
-- when the process ends, kill -9 included. A second process is refused with the holder's pid.
M.LOCK = "run.lock"
local held = {}  -- absolute run folder -> this process's lock on it (kept for the process's life)

-- lock(dir) -> true | nil, "EBUSY: ... is locked by process N", "EBUSY"|"EIO", holder pid.
-- Taking it again in the process that holds it is a no-op.
function M.lock(dir)
  local key = fs.abspath(dir)
  if held[key] then return true end
  local h, err, code, pid = fs.lock(fs.join(dir, M.LOCK))
  if not h then return nil, err, code, pid end
  held[key] = h
  return true
end

-- open(root_or_resume, id) -> rd, its folder locked (M.lock). `id` nil means root is the run
-- folder itself (resume).
function M.open(root, id)
  local dir = id and fs.join(root, id) or root
  local ok, err = fs.mkdir_p(fs.join(dir, "rounds"))
  if not ok then return nil, err end
  ok, err = M.lock(dir)
  if not ok then return nil, err end
  -- writes: the run's record of failed writes, shared with its memory (agents/run/memory.lua)
  return setmetatable({ dir = dir, id = id or fs.basename(dir), writes = writes.new() }, M)
end

function M:path(...) return fs.join(self.dir, ...) end

-- sub(rel) -> the run directory seen from its folder <rel> (same id): a session inside a run,
-- such as one subgraph's generation, writes its usual layout there
function M:sub(rel)
  local d = fs.join(self.dir, rel)
  fs.mkdir_p(d)
  return setmetatable({ dir = d, id = self.id, writes = self.writes }, M)
end

function M:worker_dir(round, k)
  local d = fs.join(self.dir, "rounds", "round_" .. round, "w" .. k)
  fs.mkdir_p(d)
  return d
end

function M:round_dir(round)
  local d = fs.join(self.dir, "rounds", "round_" .. round)
  fs.mkdir_p(d)
  return d
end

-- write(rel_or_abs, data) -> true | nil, err: strings as is, tables as pretty JSON; missing
-- folders are made. A failed write is recorded in rd.writes, traces and results alike: a run
-- folder that lost a file is no complete record of the run.
function M:write(path, data)
  if path:sub(1, 1) ~= "/" and path:sub(1, #self.dir) ~= self.dir then path = fs.join(self.dir, path) end
  if type(data) == "table" then data = json.encode(data, { pretty = true, sort_keys = true }) .. "\n" end
  fs.mkdir_p(fs.dirname(path))  -- traces of new roles need no folder set up first
  local ok, err = fs.write(path, data or "")
  if not ok then self:failed(path, err) end
  return ok, err
end

-- failed(path, err): a write of the run folder that failed (rd:write's, or an append elsewhere)
function M:failed(path, err)
  if self.writes then return self.writes:failed(path, err) end
  require("kagent.log").warn("run dir: cannot write %s: %s", path, tostring(err))
end

function M:read_json(rel)
  local s = fs.read(fs.join(self.dir, rel))
  if not s then return nil end
  return json.decode(s)
end

-- ncu_json(result, kernel_file, problem_file, round) -> the *_ncu_metrics.json table
function M.ncu_json(result, kernel_file, problem_file, round)
  local per = require("agents.lib.metrics").per_kernel(result and result.metrics)
  return {
    metrics = next(per) and per or {},
    metadata = {
      kernel_file = kernel_file, problem_file = problem_file, round_num = round,
      timestamp = os.date("!%Y-%m-%dT%H:%M:%SZ"),
      ncu_version = result and (result.profiler or result.ncu_version) or json.null,
      time_ms = result and result.time_ms or json.null,
      roofline = result and result.roofline or json.null,
      kernels = result and result.kernels or json.null,
    },
  }
end

-- KernelAgent's dtype names (torch's), which its trace readers expect
M.TORCH_DTYPE = { fp32 = "torch.float32", bf16 = "torch.bfloat16", fp16 = "torch.float16" }

-- benchmark_json(problem, device_name, dtype, kernels, extra) -> benchmark_results.json table in
-- KernelAgent's layout, so its scripts read our traces: problem, device ("cuda" or "cpu"),
-- dtype as torch names it, warmup, repeat, size, kernels = {kernel_round_<r> = {time_ms, path,
-- ...}}. Our timing has no fixed warm-up or repeat count, and a problem no single size: warmup
-- and size are null, repeat is the number of timed calls (extra.repeat); gpu is the device's name.
function M.benchmark_json(problem, device_name, dtype, kernels, extra)
  local t = { problem = problem, device = (device_name == nil or device_name == "cpu") and "cpu" or "cuda",
    gpu = device_name or "unknown", dtype = M.TORCH_DTYPE[dtype] or dtype, warmup = json.null,
    ["repeat"] = json.null, size = json.null, kernels = kernels }
  for k, v in pairs(extra or {}) do t[k] = v end
  return t
end

return M
