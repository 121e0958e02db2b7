-- The pool's wall limit of a job fits a load_inline candidate's compile step: a job whose
-- candidate builds C++/CUDA gets the worker's compile_step_s (its ready line) on top of the
-- pool's timeout, so a cold nvcc build is not taken for a hung worker (kagent/gpu/jobs.lua).
-- The worker here is a FAKE kagent_eval package: its ready line, and a reply to each job after
-- FAKE_JOB_S seconds; the real compile step is tests/eval/test_cpu_load_inline.py's.
local fs, gpu = kagent.fs, kagent.gpu

local FAKE_JOB_S = 3

local function fake_evaluator()
  local dir = spec.tmpdir("fake-eval-wall")
  fs.mkdir_p(dir .. "/kagent_eval")
  fs.write(dir .. "/kagent_eval/__init__.py", "")
  fs.write(dir .. "/kagent_eval/worker.py", table.concat({
    "import json, os, sys, time",
    "ready = {'ready': True, 'device': 'cpu', 'mode': 'cpu', 'torch': None, 'triton': None,",
    "         'package': os.path.dirname(os.path.abspath(__file__)), 'version': '" .. kagent.version .. "',",
    "         'compile_step_s': 120, 'compile_markers': ['load_inline', 'cpp_extension']}",
    "print(json.dumps(ready), flush=True)",
    "for line in sys.stdin:",
    "    req = json.loads(line)",
    "    if req.get('op') == 'shutdown':",
    "        print(json.dumps({'id': req['id'], 'ok': True}), flush=True)",
    "        break",
    "    time.sleep(" .. FAKE_JOB_S .. ")",
    "    print(json.dumps({'id': req['id'], 'ok': True, 'result': {'ok': True, 'stage': 'done'}}), flush=True)",
  }, "\n") .. "\n")
  return dir
end

describe("gpu.pool wall limit", function()
  it("gives a load_inline candidate the worker's compile bound beyond the pool's timeout", function()
    local dir = fake_evaluator()
    local problem = spec.tmpdir("wall-problem") .. "/p.py"
    fs.write(problem, "x = 1\n")
    -- a timeout well under the fake job's seconds: a plain candidate runs past it
    local pool = gpu.pool({ devices = "cpu", python = "python3", env = { PYTHONPATH = dir },
      start_timeout = 30, timeout = 1 })
    local cuda = "from torch.utils.cpp_extension import load_inline\nm = load_inline(name='x', cpp_sources='')\n"
    local built = pool:verify({ problem = problem, candidate = cuda })
    expect.eq(built.ok, true, built.error)
    local plain = pool:verify({ problem = problem, candidate = "import torch\nclass ModelNew: pass\n" })
    expect.eq(plain.ok, false)
    expect.match(plain.error, "^EWORKER: no reply in 1 s")
    pool:close()
  end, { timeout = 120 })

  it("reads a candidate given as a path, and leaves a worker without the field as it was", function()
    local jobs = require("kagent.gpu.jobs")
    -- the ready line's bound and the worker's own markers (ext_build.MARKERS)
    local READY = { compile_step_s = 600, compile_markers = { "load_inline", "cpp_extension" } }
    local path = spec.tmpdir("wall-cand") .. "/k.py"
    fs.write(path, "import torch\nfrom torch.utils.cpp_extension import load_inline\n")
    expect.eq(jobs.wall_limit(READY, { candidate = path }, 300), 900)
    expect.eq(jobs.wall_limit(READY, { candidates = { "a = 1\n", path } }, 300), 900)
    expect.eq(jobs.wall_limit(READY, { candidate = "import triton\n" }, 300), 300)
    expect.eq(jobs.wall_limit({}, { candidate = path }, 300), 300)
    expect.eq(jobs.wall_limit({ compile_step_s = 600, compile_markers = { "my_builder" } }, { candidate = path }, 300), 300,
      "the worker's markers decide, not a list of the pool's own")
  end)
end)
