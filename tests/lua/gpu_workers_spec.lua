-- The pool's automatic workers per GPU: gpu.auto_workers_per_gpu with given (fake) core, memory
-- and GPU counts, and how a pool resolves workers_per_gpu (option, KAGENT_WORKERS_PER_GPU, auto;
-- CPU mode keeps 1). Pools here start real CPU-mode workers (KAGENT_PYTHON with torch).
local gpu = require("kagent.gpu")
local proc, fs = kagent.proc, kagent.fs

local GIB = 2 ^ 30

local function need_torch()
  local r = proc.run({ spec.python, "-c", "import torch" }, { timeout = 60 })
  if not (r and r.code == 0) then skip(spec.python .. " has no torch") end
end

-- workers(cores, gib, gpus) -> the automatic choice for a host of those figures
local function workers(cores, gib, gpus)
  return gpu.auto_workers_per_gpu({ cores = cores, memory_bytes = gib * GIB, gpus = gpus }).workers
end

-- pool_in_child(env, opts_lua) -> the child's stdout and exit code: a CPU pool made there with
-- that environment, printing its devices()' workers and workers_how
local function pool_in_child(env, opts_lua)
  local dir = spec.tmpdir("workers")
  fs.write(dir .. "/p.lua", "local gpu = require('kagent.gpu')\n"
    .. "local ok, p = pcall(gpu.pool, " .. opts_lua .. ")\n"
    .. "if not ok then print('ERROR ' .. tostring(p)); return 3 end\n"
    .. "local d = assert(p:devices())\n"
    .. "print(d[1].workers, d[1].workers_how)\n"
    .. "p:close()\n")
  env.KAGENT_PYTHON = spec.python
  local r = assert(proc.run({ spec.build_dir .. "/kagent-rt", "--log-level", "warn", dir .. "/p.lua" },
    { env = env, timeout = 120 }))
  return r.stdout, r.code
end

describe("gpu.auto_workers_per_gpu", function()
  it("takes the least of cores per GPU / 4, GiB per GPU / 8 and 4", function()
    expect.eq(workers(16, 128, 1), 4, "one H100 host: 16 cores, 128 GiB")
    expect.eq(workers(128, 2048, 8), 4, "capped at 4")
    expect.eq(workers(32, 1024, 8), 1, "4 cores per GPU")
    expect.eq(workers(64, 512, 8), 2, "8 cores per GPU")
    expect.eq(workers(16, 16, 1), 2, "memory bounds it: 16 GiB / 8")
    expect.eq(workers(64, 20, 1), 2, "20 GiB: floor(2.5)")
    expect.eq(workers(2, 4, 1), 1, "never below 1")
    expect.eq(workers(16, 128, 0), 4, "no GPU counts as one")
  end)

  it("names its rule with the host's figures and uses gpu.AUTO_WORKERS", function()
    local a = gpu.auto_workers_per_gpu({ cores = 32, memory_bytes = 256 * GIB, gpus = 2 })
    expect.eq(a.workers, 4)
    expect.eq(a.gpus, 2); expect.eq(a.cores, 32)
    expect.eq(a.rule, "min(16 cores per GPU / 4, 128 GiB per GPU / 8, 4)")
    local saved = gpu.AUTO_WORKERS.max
    gpu.AUTO_WORKERS.max = 3
    local ok, n = pcall(workers, 32, 256, 2)
    gpu.AUTO_WORKERS.max = saved
    expect.truthy(ok, n)
    expect.eq(n, 3, "the cap comes from gpu.AUTO_WORKERS")
  end)

  it("reads this host's cores and memory when not given", function()
    local a = gpu.auto_workers_per_gpu({ gpus = 1 })
    local r = assert(proc.run({ "nproc" }))
    expect.eq(a.cores, tonumber((r.stdout:gsub("%s+", ""))))
    expect.truthy(a.memory_bytes > GIB, "memory " .. tostring(a.memory_bytes))
    expect.truthy(a.workers >= 1 and a.workers <= gpu.AUTO_WORKERS.max)
  end)
end)

describe("gpu.pool's workers_per_gpu", function()
  it("refuses a bad KAGENT_WORKERS_PER_GPU and a bad option", function()
    local out, code = pool_in_child({ KAGENT_WORKERS_PER_GPU = "two" }, "{ devices = 'cpu' }")
    expect.eq(code, 3, out)
    expect.match(out, "KAGENT_WORKERS_PER_GPU must be a whole number >= 1 or auto, not 'two'")
    expect.errors(function() gpu.pool({ workers_per_gpu = "many" }) end, "workers_per_gpu must be >= 1 or \"auto\"")
  end)

  it("is 1 by default, 1 when auto in CPU mode, and what the option or KAGENT_WORKERS_PER_GPU says", function()
    need_torch()
    local out = pool_in_child({}, "{ devices = 'cpu' }")
    expect.eq(out, "1\tdefault\n")
    out = pool_in_child({ KAGENT_WORKERS_PER_GPU = "auto" }, "{ devices = 'cpu' }")
    expect.eq(out, "1\tauto: 1 in CPU mode\n")
    out = pool_in_child({ KAGENT_WORKERS_PER_GPU = "2" }, "{ devices = 'cpu' }")
    expect.eq(out, "2\tKAGENT_WORKERS_PER_GPU\n")
    out = pool_in_child({ KAGENT_WORKERS_PER_GPU = "2" }, "{ devices = 'cpu', workers_per_gpu = 1 }")
    expect.eq(out, "1\tset\n", "the option wins over the environment")
  end)
end)
