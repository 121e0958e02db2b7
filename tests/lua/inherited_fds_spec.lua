-- Issue #53 item 2: descriptors kagent-rt inherits (a .env on fd 7, a file in the home folder on
-- fd 8, opened by the shell that started it) reach no process it starts, and no key comes back
-- in a job's result whatever route it took: a child kagent-rt started through bash with both
-- open, a real CPU-mode worker, and candidates that try them
-- (tests/fixtures/adversarial/cpu_inherited_fds.py) or echo a key they hold another way.
local fs, json, proc = kagent.fs, kagent.json, kagent.proc

local function fake_key(tag)
  return string.format("fake-%s-%08x%08x", tag, math.random(0, 0x7fffffff), math.random(0, 0x7fffffff))
end

-- kagent-rt run as a shell would: `exec 7<.env 8>>notes; exec kagent-rt ...`
local function run_with_fds(dir, args, env)
  local argv = { "bash", "-c", 'exec 7<"$1" 8>>"$2"; shift 2; exec "$@"', "-", dir .. "/.env", dir .. "/notes",
    spec.build_dir .. "/kagent-rt", "--env-file", dir .. "/.env" }
  for _, a in ipairs(args) do argv[#argv + 1] = a end
  return assert(proc.run(argv, { env = env, timeout = 300 }))
end

local function folder(name, key)
  local dir = spec.tmpdir(name)
  fs.write(dir .. "/.env", "ANTHROPIC_API_KEY=" .. key .. "\n")
  fs.write(dir .. "/notes", "")
  return dir
end

describe("kagent-rt started with descriptors open", function()
  it("marks them close-on-exec: a program it starts through libc has none of them", function()
    local dir = folder("fds-popen", fake_key("popen"))
    -- io.popen is libc's (no kagent.proc): only the marks made at start keep the descriptors out
    fs.write(dir .. "/t.lua", [[
      local p = io.popen("(cat <&7 && echo x >&8) 2>/dev/null; echo rc=$?")
      print(p:read("*a"))
      p:close()
    ]])
    local r = run_with_fds(dir, { dir .. "/t.lua" })
    local notes = fs.read(dir .. "/notes")
    proc.run({ "rm", "-rf", dir })
    expect.eq(r.code, 0, r.stderr)
    expect.match(r.stdout, "^rc=[1-9]")
    expect.eq(notes, "", "nothing appended through fd 8")
  end)

  it("keeps them and the keys from a CPU-mode candidate", function()
    local r = proc.run({ spec.python, "-c", "import torch" }, { timeout = 60 })
    if not (r and r.code == 0) then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local in_env, in_file = fake_key("env"), fake_key("file")
    local dir = folder("fds-job", in_file)  -- the environment's key overrides the .env's
    local fix = spec.root .. "/tests/fixtures/"
    fs.write(dir .. "/fds.py", (assert(fs.read(fix .. "adversarial/cpu_inherited_fds.py")):gsub("@TOKEN@", "t")))
    -- a key the candidate got by another route (here its own source): the .env's, which the
    -- environment overrode, so it is in no variable of kagent-rt
    fs.write(dir .. "/echo.py", 'raise RuntimeError("REPORT key=' .. in_file .. '")\n')
    fs.write(dir .. "/job.lua", [[
      local a = kagent.args
      local pool = kagent.gpu.pool({ devices = "cpu", python = a[1], timeout = 120 })
      local out = {}
      for i = 3, #a do out[#out + 1] = pool:verify({ problem = a[2], candidate = a[i] }) end
      pool:close()
      print(kagent.json.encode(out))
    ]])
    local run = run_with_fds(dir, { dir .. "/job.lua", spec.python, fix .. "eval/relu_problem.py",
      dir .. "/fds.py", dir .. "/echo.py" }, { ANTHROPIC_API_KEY = in_env })
    local notes = fs.read(dir .. "/notes")
    proc.run({ "rm", "-rf", dir })
    expect.eq(run.code, 0, run.stderr)
    local res = json.decode(run.stdout)
    expect.match(res[1].error, "REPORT read=refused wrote=refused")
    expect.eq(notes, "", "nothing appended through fd 8")
    expect.match(res[2].error, "REPORT key=%[redacted ANTHROPIC_API_KEY%]")
    for _, text in ipairs({ run.stdout, run.stderr }) do
      expect.falsy(text:find(in_file, 1, true), "the .env's key came back")
      expect.falsy(text:find(in_env, 1, true), "the environment's key came back")
    end
  end, { timeout = 400 })
end)
