-- Driver of tests/gpu/devices_gpu_check.sh (GPU only). Without arguments: runs itself once per
-- CUDA_VISIBLE_DEVICES case as a child kagent-rt ("case" mode: a pool on every GPU it may use,
-- one Triton ReLU verified and timed on pool device 0, printed as a JSON line), checks each, and
-- prints PASS/FAIL lines; returns 1 on any failure.
local json, proc = kagent.json, kagent.proc
local gpu = require("kagent.gpu")
local BIN = os.getenv("KAGENT_BIN") or "/proc/self/exe"
local PY = os.getenv("KAGENT_PYTHON") or "python3"
local fx = kagent.root .. "/tests/fixtures/eval/"

if kagent.args[1] == "case" then
  local pool = gpu.pool({ timeout = 600 })
  local devs, err = pool:devices()
  local out = { gpus = gpu.gpus(), devices = devs, error = err }
  if devs and devs[1].mode == "cuda" then
    local r = pool:benchmark({ problem = fx .. "gpu_relu_problem.py", candidate = fx .. "gpu_relu_triton.py",
      device = 0, bench = { min_time = 0.2, baselines = { "eager" } } })
    out.result = { ok = r.ok, error = r.error, device = r.device, gpu = r.gpu, median_ms = r.time_ms and r.time_ms.median }
  end
  pool:close()
  print(json.encode(out))
  return 0
end

-- the last line of a child's stdout as a table (JSON nulls removed), or {}
local function last_json(text)
  local v = json.decode(text:match("([^\n]+)\n*$") or "null")
  return type(v) == "table" and json.strip_nulls(v) or {}
end

local failures = 0
local function check(cond, what)
  print((cond and "PASS " or "FAIL ") .. what)
  if not cond then failures = failures + 1 end
end

local function mask_label(mask) return "mask " .. (mask and ("'" .. mask .. "'") or "unset") end

-- case(mask) -> the case's JSON (mask nil: CUDA_VISIBLE_DEVICES unset)
local function case(mask)
  local r = assert(proc.run({ BIN, "--env-file", "/dev/null", kagent.root .. "/tests/gpu/devices_gpu_check.lua", "case" },
    { cwd = kagent.root, env = { CUDA_VISIBLE_DEVICES = mask or false }, timeout = 900 }))
  io.write(r.stderr:sub(-2000))
  local out = last_json(r.stdout)
  check(r.code == 0 and out.gpus ~= nil, string.format("%s: the case ran (exit %s)", mask_label(mask), tostring(r.code)))
  return out
end

-- what CUDA sees under a mask: {count, name, uuid = "GPU-..." or nil where torch has no uuid}
local function cuda_view(mask)
  local code = "import json, torch\np = torch.cuda.get_device_properties(0)\n"
    .. "u = getattr(p, 'uuid', None)\n"
    .. "print(json.dumps({'count': torch.cuda.device_count(), 'name': torch.cuda.get_device_name(0),"
    .. " 'uuid': ('GPU-' + str(u)) if u is not None else None}))"
  local r = assert(proc.run({ PY, "-c", code }, { env = { CUDA_VISIBLE_DEVICES = mask }, timeout = 120 }))
  return last_json(r.stdout)
end

local all = gpu.gpus()
check(#all >= 1, "gpu.gpus() lists " .. #all .. " GPU(s)")
if #all == 0 then return 1 end

-- gpu_case(mask, want): the pool runs on the one GPU `want` (a gpus() entry of the unmasked list)
local function gpu_case(mask, want)
  local label = mask_label(mask)
  local out = case(mask)
  local d, r = (out.devices or {})[1], out.result or {}
  check(d and d.device == 0 and d.mode == "cuda", label .. ": pool device 0 is a GPU worker " .. tostring(out.error or ""))
  check(r.ok == true, label .. ": the ReLU verified and timed (" .. tostring(r.error or (r.median_ms and r.median_ms .. " ms")) .. ")")
  local g = r.gpu or {}
  check(r.device == 0, label .. ": result.device = 0, got " .. tostring(r.device))
  check(g.index == want.index and g.uuid == want.uuid and g.name == want.name,
    string.format("%s: result.gpu is GPU %s %s %s (got %s)", label, tostring(want.index), tostring(want.name),
      tostring(want.uuid), json.encode(g)))
  if mask == nil then check(#(out.gpus or {}) == #all, label .. ": every GPU allowed") end
  if g.visible then
    local seen = cuda_view(g.visible)
    check(seen.count == 1 and seen.name == want.name, string.format("%s: CUDA under the worker's mask %s sees one %s (got %s)",
      label, g.visible, tostring(want.name), json.encode(seen)))
    check(seen.uuid ~= nil and seen.uuid:lower() == tostring(want.uuid):lower(), string.format(
      "%s: ... with UUID %s (torch says %s)", label, tostring(want.uuid), tostring(seen.uuid)))
  end
  print(string.format("FIGURE devices %s: pool device %s -> GPU %s %s, ReLU median %s ms", label, tostring(r.device),
    tostring(g.index), tostring(g.name), tostring(r.median_ms)))
end

gpu_case(nil, all[1])
gpu_case("0", all[1])
gpu_case(all[1].uuid, all[1])
if all[2] then gpu_case("1", all[2]) end

local none = case("")
check(none.devices and none.devices[1].mode == "cpu" and #(none.gpus or { 1 }) == 0,
  "mask '': no GPU allowed, the pool runs a CPU-mode worker")

print(failures == 0 and "devices GPU check: all passed" or ("devices GPU check: " .. failures .. " failure(s)"))
return failures == 0 and 0 or 1
