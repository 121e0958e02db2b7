-- Options and inputs of the agent scripts are checked before any work (agents/run/args.lua on
-- lua-argparse, agents/run/options.lua, agents/run/inputs.lua): a table of bad command lines and the
-- one line each gets; the scripts themselves refusing them at once (exit 2, no run folder, no
-- database, no evaluator); each entry point's own usage; shell completion that bash, zsh and fish
-- accept and that completes; --devices against the GPUs found; a problem file that does not
-- load named as the problem; a corrupt state.json and a read-only database in one line.
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs, json, proc = kagent.fs, kagent.json, kagent.proc
local args = require("agents.run.args")
local options = require("agents.run.options")
local session = require("fake_session")
local cpu = session.cpu()

-- argv -> the one line args.parse answers (plain substrings it must contain)
local BAD = {
  { { "--rounds", "-1" }, "--rounds expects a whole number >= 0, got '-1'" },
  { { "--rounds", "1.5" }, "--rounds expects a whole number >= 0, got '1.5'" },
  { { "--rounds=-3" }, "--rounds expects a whole number >= 0, got '-3'" },
  { { "--rounds", "x" }, "--rounds expects a whole number >= 0, got 'x'" },
  { { "--beam", "0" }, "--beam expects a whole number >= 1, got '0'" },
  { { "--directions", "0" }, "--directions expects a whole number >= 1, got '0'" },
  { { "--refine", "-2" }, "--refine expects a whole number >= 0, got '-2'" },
  { { "--sol-stop", "150" }, "--sol-stop expects a number > 0 and <= 100, got '150'" },
  { { "--temperature", "nan" }, "--temperature expects a number >= 0 and <= 2, got 'nan'" },
  { { "--job-timeout", "0" }, "--job-timeout expects a number > 0, got '0'" },
  { { "--budget-usd", "-1" }, "--budget-usd expects a number > 0, got '-1'" },
  { { "--dtype", "bf17" }, "--dtype must be one of fp32, bf16, fp16, got 'bf17'; did you mean 'bf16'?" },
  { { "--gate", "abba" }, "--gate must be one of interleaved, noise, got 'abba'" },
  { { "--metrics", "ful" }, "did you mean 'full'?" },
  { { "--roundz", "3" }, "unknown option '--roundz'; did you mean '--rounds'?" },
  { { "--direction", "3" }, "did you mean '--directions'?" },
  { { "--rou", "3" }, "did you mean '--rounds'?" },
  { { "--tuner", "true" }, "--tuner is a flag and takes no value (got 'true')" },
  { { "--problem" }, "option '--problem' requires an argument" },
  { { "extra.py" }, "unexpected argument 'extra.py'" },
  { { "--devices", "0,x" }, "--devices: expects all, cpu, or GPU indices such as 0 or 0,1; got '0,x'" },
  { { "--devices", "1,1" }, "GPU 1 is named twice" },
  { { "--llm-timeout", "idle=5x" }, "--llm-timeout: bad duration '5x'" },
  { { "--workers-per-gpu", "0" }, "--workers-per-gpu: expects auto or a whole number >= 1; got '0'" },
  { { "--workers-per-gpu", "1.5" }, "--workers-per-gpu: expects auto or a whole number >= 1; got '1.5'" },
  { { "--llm-failures", "0" }, "--llm-failures expects a whole number >= 1, got '0'" },
  { { "--completion", "tcsh" }, "'bash', 'zsh', 'fish'" },
}

local function agent(name, argv, env, timeout)
  local e = { KAGENT_PYTHON = spec.python, ANTHROPIC_API_KEY = false, OPENAI_API_KEY = false, KAGENT_LLM_URL = false,
    KAGENT_MODEL = false, OPENAI_BASE_URL = false, KAGENT_LLM_CACHE = false, KAGENT_PROGRESS = "lines" }
  for k, v in pairs(env or {}) do e[k] = v end
  return session.run_agent(name, argv, e, timeout or 120)
end

local function lines(text)
  local out = {}
  for l in text:gmatch("[^\n]+") do out[#out + 1] = l end
  return out
end

describe("agent options", function()
  it("refuse every bad value with one line that says what is allowed", function()
    for _, c in ipairs(BAD) do
      local opts, err = args.parse(c[1], options, { prog = "agents/beam.lua" })
      expect.eq(opts, nil, table.concat(c[1], " ") .. " was accepted")
      expect.truthy(err:find(c[2], 1, true), table.concat(c[1], " ") .. ": " .. err)
      expect.no_match(err, "\n", "one line")
    end
    local o = assert(args.parse({ "--problem", "p.py", "--rounds", "3", "--max-cv=0.2", "--tuner" }, options))
    expect.eq(o.rounds, 3); expect.eq(o.max_cv, 0.2); expect.eq(o.tuner, true); expect.eq(o.beam, 2)
    expect.same(o._given, { problem = true, rounds = true, max_cv = true, tuner = true }, "what the command line gave")
    -- left to the evaluator, whose default (job_defaults in its ready line) is today's KernelBench
    expect.eq(o.tolerance, nil, "no tolerance is sent unless chosen")
    expect.eq(assert(args.parse({ "--problem", "p.py", "--tolerance", "kernelbench-v0.1" }, options)).tolerance,
      "kernelbench-v0.1")
  end)

  it("stop the script at once: exit 2, one line, no run folder, no database, no evaluator", function()
    local dir = spec.tmpdir("options-refused")
    -- "before any work" is what happened, not how long it took (a loaded single core is slow to
    -- start any process): a worker that starts leaves this mark
    local pydir = spec.tmpdir("options-python")
    local started = pydir .. "/worker-started"
    local python = session.python_wrapper(pydir,
      string.format('touch "%s"; exec "%s" -m kagent_eval.worker "$@"', started, spec.python))
    local fifo = spec.tmpdir("options-fifo") .. "/pipe.py"
    expect.eq(kagent.proc.run({ "mkfifo", fifo }, { timeout = 10 }).code, 0)
    for _, c in ipairs({
      { "beam.lua", { "--problem", cpu.problem, "--dtype", "bf17" }, "must be one of fp32, bf16, fp16" },
      { "beam.lua", { "--problem", cpu.problem, "--rounds", "-1" }, "--rounds expects a whole number >= 0" },
      { "skill.lua", { "--problem", cpu.problem, "--directions", "0" }, "--directions expects" },
      { "tune.lua", { "--problem", cpu.problem, "--beam", "0" }, "--beam expects" },
      { "generate.lua", { "--problem", cpu.problem, "--gen-workers", "0" }, "--gen-workers expects" },
      { "sweep.lua", { "--problems", cpu.problem, "--policy", "tune", "--rounds", "1.5" }, "--rounds expects" },
      { "skills.lua", { "--stats", "--op-class", "gem" }, "did you mean 'gemm'?" },
      { "skills.lua", { "--stats", "--list" }, "one of --stats, --list or --retrieve" },
      { "skills.lua", { "--list", "--gpu", "x" }, "--gpu is an option of --stats" },
      { "skills.lua", { "--stats", "--db", dir .. "/typo.db" }, "no such memory database" },
      { "skills.lua", { "--retrieve", "--metrics", kagent.root .. "/examples/README.md", "--problem", cpu.problem },
        "as JSON" },
      { "beam.lua", { "--problem", dir .. "/missing.py" }, "cannot read the problem file" },
      -- a named pipe would stop the run waiting for a writer, deaf to signals: refused at once
      { "beam.lua", { "--problem", fifo }, "(a named pipe or socket, not a file)" },
      { "beam.lua", { "--problem", cpu.fx .. "fast.py" }, "has no class Model" },
      { "beam.lua", { "--problem", cpu.problem, "--kernel", dir .. "/missing.py" }, "cannot read the kernel file" },
      { "beam.lua", { "--problem", cpu.problem, "--kernel", "/dev/null" }, "the kernel file /dev/null is empty" },
      { "beam.lua", { "--problem", cpu.problem, "--policy", "beem" }, "no policy 'beem'" },
    }) do
      local argv = { unpack(c[2]) }
      if c[1] ~= "skills.lua" then argv[#argv + 1] = "--out"; argv[#argv + 1] = dir .. "/runs" end
      local r = agent(c[1], argv, { KAGENT_DB = dir .. "/mem.db", KAGENT_PYTHON = python })
      local what = c[1] .. " " .. table.concat(c[2], " ")
      expect.eq(r.code, 2, what .. "\n" .. r.stderr)
      expect.eq(#lines(r.stderr), 1, what .. ": one line, got:\n" .. r.stderr)
      expect.truthy(r.stderr:find(c[3], 1, true), what .. ": " .. r.stderr)
      expect.falsy(fs.exists(started), what .. ": refused before any work, but an evaluator worker started")
    end
    expect.eq(#(fs.list(dir) or {}), 0, "no database, no run folder: " .. table.concat(fs.list(dir) or {}, ", "))
  end)

  it("--dtype bf17 fails before starting anything, naming the allowed values", function()
    local dir = spec.tmpdir("options-dtype")
    -- any python started at all (a problem check, a worker) leaves this mark
    local pydir = spec.tmpdir("options-python")
    local started, python = pydir .. "/python-started", pydir .. "/python"
    fs.write(python, string.format('#!/bin/sh\ntouch "%s"\nexec "%s" "$@"\n', started, spec.python))
    expect.eq(proc.run({ "chmod", "+x", python }).code, 0)
    local r = agent("beam.lua", { "--problem", cpu.problem, "--dtype", "bf17", "--out", dir .. "/runs" },
      { KAGENT_PYTHON = python })
    expect.eq(r.code, 2)
    expect.eq(r.stderr, "agents/beam.lua: --dtype must be one of fp32, bf16, fp16, got 'bf17'; did you mean 'bf16'? "
      .. "(--help lists the options)\n")
    expect.falsy(fs.exists(started), "refused before any python started")
    expect.falsy(fs.exists(dir .. "/runs"), "no run folder")
  end)

  it("beam.lua with no arguments says --problem is required, before anything about the LLM", function()
    local r = agent("beam.lua", {})
    expect.eq(r.code, 2)
    expect.eq(r.stderr, "agents/beam.lua: --problem is required (a KernelBench problem file; --help lists the options)\n")
  end)

  it("each entry point has its own usage", function()
    for name, want in pairs({ ["beam.lua"] = "Hardware-guided beam search", ["skill.lua"] = "KernelSkill's loop",
        ["tune.lua"] = "LLM-free tuner", ["generate.lua"] = "A first correct kernel", ["sweep.lua"] = "A policy over many problems",
        ["skills.lua"] = "what memory has learned" }) do
      local r = agent(name, { "--help" })
      expect.eq(r.code, 0, name)
      expect.truthy(r.stdout:find("usage: kagent-rt agents/" .. name, 1, true), name .. " usage line:\n" .. r.stdout:sub(1, 300))
      expect.truthy(r.stdout:find(want, 1, true), name .. " describes itself")
      expect.truthy(r.stdout:find("--completion <shell>", 1, true), name .. " offers completion")
    end
    local tune = agent("tune.lua", { "--help" }).stdout
    -- the LLM's --model (not --model-file, the in-model objective's model)
    expect.no_match(tune, "--model <", "the tuner's help has no LLM settings")
    expect.truthy(agent("beam.lua", { "--help" }).stdout:find("--llm-timeout <time>", 1, true), "beam.lua's has")
  end)

  it("generate shell completion that bash, zsh and fish accept, and bash completes with it", function()
    local dir = spec.tmpdir("options-completion")
    for _, shell in ipairs({ "bash", "zsh", "fish" }) do
      local r = agent("beam.lua", { "--completion", shell })
      expect.eq(r.code, 0, shell)
      local path = dir .. "/beam." .. shell
      fs.write(path, r.stdout)
      local have = proc.run({ "sh", "-c", "command -v " .. shell }, { timeout = 10 })
      if have.code == 0 then
        local check = assert(proc.run({ shell, "-n", path }, { timeout = 30 }))
        expect.eq(check.code, 0, shell .. " -n: " .. check.stderr)
      end
    end
    -- bash: `kagent-rt agents/beam.lua --dt<TAB>` and `... --dtype b<TAB>`
    local function complete(words)
      local script = string.format([[source %s/beam.bash; source %s/skill.bash
COMP_WORDS=(%s); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _kagent_rt; printf '%%s\n' "${COMPREPLY[@]}"]],
        dir, dir, words)
      local r = assert(proc.run({ "bash", "-c", script }, { timeout = 30 }))
      expect.eq(r.code, 0, r.stderr)
      return r.stdout
    end
    fs.write(dir .. "/skill.bash", agent("skill.lua", { "--completion", "bash" }).stdout)
    expect.eq(complete("kagent-rt agents/beam.lua --dt"), "--dtype\n")
    expect.eq(complete("kagent-rt agents/beam.lua --dtype bf"), "bf16\n")
    expect.eq(complete("kagent-rt --log-level warn agents/skill.lua --gate ''"), "interleaved\nnoise\n")
    expect.truthy(complete("kagent-rt agents/beam.lua --llm-t"):find("--llm-timeout", 1, true), "the LLM options")
    -- --policy offers the policies' names (and files), kagent-rt the entry points (and files)
    expect.eq(complete("kagent-rt agents/beam.lua --policy gr"), "greedy\n")
    expect.truthy(complete("kagent-rt agents/beam.lua --policy ''"):find("beam\ngreedy\nskill\ntune\n", 1, true), "policy names")
    local entry = complete("kagent-rt agents/be")
    expect.truthy(entry:find("^agents/beam.lua\nagents/bench.lua\n"), "the entry points first: " .. entry)
    expect.no_match(entry, "tune", "only those that match")
    -- fish: the options of beam.lua are offered only after agents/beam.lua
    local fish = fs.read(dir .. "/beam.fish")
    expect.truthy(fish:find("complete -c kagent-rt -n 'string match -qr", 1, true), fish:sub(1, 300))
    local have_fish = proc.run({ "sh", "-c", "command -v fish" }, { timeout = 10 })
    if have_fish.code == 0 then
      local r = assert(proc.run({ "fish", "-c", "source " .. dir .. "/beam.fish; complete -C 'kagent-rt agents/beam.lua --dty'" },
        { timeout = 30 }))
      expect.truthy(r.stdout:find("--dtype", 1, true), "fish completes --dtype: " .. r.stdout .. r.stderr)
      r = assert(proc.run({ "fish", "-c", "source " .. dir .. "/beam.fish; complete -C 'kagent-rt agents/tune.lua --dty'" },
        { timeout = 30 }))
      expect.no_match(r.stdout, "--dtype", "not after another script")
      r = assert(proc.run({ "fish", "-c", "source " .. dir .. "/beam.fish; complete -C 'kagent-rt agents/beam.lua --policy gr'" },
        { timeout = 30 }))
      expect.truthy(r.stdout:find("greedy", 1, true), "fish completes --policy names: " .. r.stdout .. r.stderr)
      r = assert(proc.run({ "fish", "-c", "source " .. dir .. "/beam.fish; complete -C 'kagent-rt agents/sk'" }, { timeout = 30 }))
      expect.truthy(r.stdout:find("agents/skill.lua", 1, true), "fish completes the entry points: " .. r.stdout .. r.stderr)
    end
  end)

  it("--devices names a GPU that is not here: a clear line before any worker starts", function()
    local dir = spec.tmpdir("options-devices")
    local r = agent("tune.lua", { "--problem", cpu.problem, "--kernel", cpu.fx .. "slow.py", "--devices", "99",
      "--out", dir .. "/runs" }, { KAGENT_DB = dir .. "/mem.db" })
    expect.eq(r.code, 2)
    expect.truthy(r.stderr:find("--devices 99: there is no GPU 99 here", 1, true), r.stderr)
    expect.eq(#lines(r.stderr), 1, r.stderr)
    expect.falsy(fs.exists(dir .. "/runs"), "no run folder")
  end)

  it("a corrupt state.json is one line and exit 2", function()
    local dir = spec.tmpdir("options-state")
    fs.mkdir_p(dir .. "/run")
    for _, text in ipairs({ "{\"version\": 3, \"opts\": ", "[]", "{\"version\": 3}" }) do
      fs.write(dir .. "/run/state.json", text)
      local r = agent("beam.lua", { "--resume", dir .. "/run" }, { KAGENT_DB = dir .. "/mem.db" })
      expect.eq(r.code, 2, text)
      expect.eq(#lines(r.stderr), 1, r.stderr)
      expect.truthy(r.stderr:find("state.json cannot be read", 1, true), r.stderr)
    end
    local r = agent("beam.lua", { "--resume", dir .. "/nothing" })
    expect.eq(r.code, 2)
    expect.truthy(r.stderr:find("no state.json there", 1, true), r.stderr)
  end)

  it("a database that cannot be written is one line and exit 2", function()
    local dir = spec.tmpdir("options-readonly")
    assert(kagent.mem.open(dir .. "/mem.db")):close()
    local argv = { "--problem", cpu.problem, "--kernel", cpu.fx .. "slow.py", "--devices", "cpu", "--out", dir .. "/runs" }
    local run = function(env) return agent("tune.lua", argv, env) end
    -- permissions bind only a user other than root: as root the run drops to nobody
    local uid = tonumber(assert(proc.run({ "id", "-u" }, { timeout = 10 })).stdout)
    if uid == 0 then
      local bin = os.getenv("KAGENT_BIN") or kagent.exe
      local check = proc.run({ "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", bin, "--version" }, { timeout = 10 })
      if not (check and check.code == 0) then skip("running as root, and setpriv cannot drop to nobody here") end
      run = function(env)
        local cmd = { "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", bin, "--env-file", "/dev/null",
          kagent.root .. "/agents/tune.lua" }
        for _, a in ipairs(argv) do cmd[#cmd + 1] = a end
        env.KAGENT_PYTHON, env.KAGENT_PROGRESS = spec.python, "lines"
        return assert(proc.run(cmd, { cwd = kagent.root, env = env, timeout = 60 }))
      end
      proc.run({ "chmod", "0777", dir }, { timeout = 10 })
    end
    proc.run({ "chmod", "0444", dir .. "/mem.db" }, { timeout = 10 })
    local r = run({ KAGENT_DB = dir .. "/mem.db" })
    expect.eq(r.code, 2, r.stderr)
    expect.eq(#lines(r.stderr), 1, r.stderr)
    expect.truthy(r.stderr:find("the memory database " .. dir .. "/mem.db cannot be written", 1, true), r.stderr)
    expect.falsy(fs.exists(dir .. "/runs"), "no run folder")
  end)

  it("--workers-per-gpu: the run says how many workers share the device and summary.json records it", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("options-workers")
    local r = agent("tune.lua", { "--problem", cpu.problem, "--kernel", cpu.fx .. "slow.py", "--devices", "cpu",
      "--rounds", "0", "--workers-per-gpu", "2", "--out", dir .. "/runs" }, { KAGENT_DB = dir .. "/mem.db" }, 240)
    expect.eq(r.code, 0, r.stderr)
    expect.truthy(r.stderr:find("tune.lua: 2 evaluator worker(s) per device (set)", 1, true), r.stderr)
    local s = json.decode(fs.read(session.newest_run(dir .. "/runs") .. "/summary.json"))
    expect.eq(s.workers_per_gpu, 2)
  end, { timeout = 300 })

  it("a problem file that does not load is named as the problem, and the run row says failed", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("options-problem")
    fs.write(dir .. "/broken.py", "import torch\nclass Model(torch.nn.Module:\n    pass\n\ndef get_inputs():\n    return []\n\n"
      .. "def get_init_inputs():\n    return []\n")
    local r = agent("tune.lua", { "--problem", dir .. "/broken.py", "--kernel", cpu.fx .. "slow.py", "--devices", "cpu",
      "--out", dir .. "/runs" }, { KAGENT_DB = dir .. "/mem.db" })
    expect.eq(r.code, 2, r.stderr)
    expect.truthy(r.stderr:find("the problem file " .. dir .. "/broken.py fails on its own", 1, true), r.stderr)
    expect.truthy(r.stderr:find("SyntaxError", 1, true), "the reason: " .. r.stderr)
    expect.no_match(r.stderr, "input kernel")
    local rd = session.newest_run(dir .. "/runs")
    local s = json.decode(fs.read(rd .. "/summary.json"))
    expect.eq(s.status, "failed")
    local db = assert(kagent.mem.open(dir .. "/mem.db"))
    local row = db:query("SELECT status, summary FROM runs")[1]
    expect.eq(row.status, "failed", "never left running")
    expect.truthy(row.summary:find("fails on its own", 1, true))
    db:close()
  end, { timeout = 300 })

  it("fuse.lua and integrate.lua name a problem whose inputs cannot be drawn as the fault (exit 2)", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("options-raises")
    fs.write(dir .. "/raises.py", "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n\n"
      .. "def get_inputs():\n    raise RuntimeError('boom in get_inputs')\n\ndef get_init_inputs():\n    return []\n")
    local r = agent("fuse.lua", { "--problem", dir .. "/raises.py", "--no-llm", "--devices", "cpu", "--out", dir .. "/runs" },
      { KAGENT_DB = dir .. "/mem.db" })
    expect.eq(r.code, 2, r.stderr)
    expect.truthy(r.stderr:find("the problem file " .. dir .. "/raises.py fails on its own", 1, true), r.stderr)
    expect.match(r.stderr, "boom in get_inputs")
    expect.eq(json.decode(fs.read(session.newest_run(dir .. "/runs") .. "/summary.json")).status, "failed")
    r = agent("integrate.lua", { "--kernel", kagent.root .. "/examples/kernels/cpu/rmsnorm_small.py", "--kernel-problem",
      kagent.root .. "/examples/problems/rmsnorm_small.py", "--model", dir .. "/raises.py", "--class", "Model",
      "--devices", "cpu", "--out", dir .. "/int" }, {})
    expect.eq(r.code, 2, r.stderr)
    expect.match(r.stderr, "fails on its own %(stage load: ERUN: RuntimeError: boom in get_inputs%)")
  end, { timeout = 300 })
end)
