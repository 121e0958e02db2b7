-- agents/sweep.lua: its figures and plan (pure), and a local sweep on the CPU against the FAKE
-- LLM server that is interrupted and resumed (needs a python with torch: KAGENT_PYTHON).
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs, json, proc, mem = kagent.fs, kagent.json, kagent.proc, kagent.mem
local figures = require("agents.tools.sweep.figures")
local plan_lib = require("agents.tools.sweep.plan")
local local_run = require("agents.tools.sweep.local_run")
local slurm = require("agents.tools.sweep.slurm")
local fake = require("fake_session")
local sweep = require("sweep_session")

local function row(name, verified, eager, compile, extra)
  local r = { name = name, status = verified and "done" or "failed", verified = verified,
    speedup = { eager = eager, compile = compile, input = extra and extra.input }, tokens = extra and extra.tokens or 0,
    cost_usd = extra and extra.cost or 0, problem_s = extra and extra.s or 0, gpu_hours = extra and extra.gh or 0 }
  return r
end

describe("sweep figures", function()
  it("follow their definitions", function()
    local rows = {
      row("a", true, 2.0, 1.5, { input = 1.1, tokens = 100, cost = 0.5, s = 3600, gh = 1 }),
      row("b", true, 0.5, 0.8, { input = 1.0, tokens = 50, s = 1800, gh = 0.5 }),
      row("c", true, 1.1, nil, { input = 1.3 }),   -- no compile baseline measured
      row("d", false, nil, nil, { tokens = 25 }),   -- failed: counts in every denominator
    }
    local agg = figures.aggregate(rows, { wall_s = 10 })
    expect.eq(agg.problems, 4)
    expect.eq(agg.correct, 3)
    expect.eq(agg.failed, 1)
    expect.near(agg.correctness_rate, 0.75, 1e-12)
    expect.near(agg.fast_p.eager["1.0"], 2 / 4, 1e-12, "a and c beat eager")
    expect.near(agg.fast_p.eager["1.2"], 1 / 4, 1e-12, "only a beats eager by 1.2x")
    expect.near(agg.fast_p.compile["1.0"], 1 / 4, 1e-12, "only a beats compile; c has no compile baseline")
    expect.near(agg.speedup.eager.geomean, (2.0 * 0.5 * 1.1) ^ (1 / 3), 1e-12)
    expect.near(agg.speedup.eager.mean, (2.0 + 0.5 + 1.1) / 3, 1e-12)
    expect.eq(agg.speedup.eager.min, 0.5)
    expect.eq(agg.speedup.eager.median, 1.1)
    expect.eq(agg.speedup.eager.max, 2.0)
    expect.eq(agg.speedup.compile.n, 2)
    expect.near(agg.speedup.compile.geomean, math.sqrt(1.5 * 0.8), 1e-12)
    expect.eq(agg.baseline_missing.compile, 1)
    expect.eq(agg.tokens, 175)
    expect.near(agg.cost_usd, 0.5, 1e-12)
    expect.eq(agg.problem_s, 5400)
    expect.near(agg.gpu_hours, 1.5, 1e-12)
    rows[4].error = "exit 2: [round 0/0] workers 0/1 busy\nagents/tune.lua: the memory database /x cannot be written: EIO\n"
    local text = figures.table_text(rows, agg)
    expect.match(text, "\n%- d: exit 2: agents/tune%.lua: the memory database /x cannot be written: EIO",
      "a failed row says why under the table")
    expect.match(text, "correct 3/4 %(75%%%)")
    expect.match(text, "fast_1%.0 vs eager 50%%, fast_1%.2 vs eager 25%%")
    expect.match(text, "x eager: geomean 1%.032, mean 1%.200 %(min 0%.500, median 1%.100, max 2%.000; n=3%)")
    expect.match(text, "| d | failed | no |")
  end)

  it("split each problem's time into baselines, search and confirmation from its summary", function()
    local p = { name = "p1" }
    local summary = { status = "done", verified = true, baselines = { eager_ms = 1, compile_ms = 1, source = "cached" },
      time_split = { baselines_s = 4.5, search_s = 60, confirm_s = 20.5 }, tokens = { total = 0 } }
    local r = figures.row(p, summary, { status = "done", launches = {} })
    expect.same(r.time_split, { baselines_s = 4.5, search_s = 60, confirm_s = 20.5 })
    expect.eq(r.baselines_source, "cached")
    local old = figures.row({ name = "p2" }, { status = "done", verified = true, tokens = { total = 0 } }, nil)
    expect.same(old.time_split, {}, "a summary from before the split has none")
    local text = figures.table_text({ r, old }, figures.aggregate({ r, old }))
    expect.match(text, "| p1 | cached | 4%.5 | 60%.0 | 20%.5 | 85%.0 |")
    expect.match(text, "| p2 | %- | %- | %- | %- | %- |")
    expect.match(text, "| all | | 4%.5 | 60%.0 | 20%.5 | 85%.0 |")
  end)

  it("say, for a fuse row, why a first kernel source was passed over for the one kept", function()
    local fuse_rows = require("agents.tools.sweep.fuse_rows")
    local r = fuse_rows.row({ mode = "fuse", subgraphs = { count = 1, distinct = 1 },
      first_program = { verified = true, time_ms = 2.0, eager_ms = 2.0, compile_ms = 1.0, kernels = {
        { dir = "sg_1", source = "reference", verified = true,
          passed_over = "inductor: correctness: EMISMATCH: trial 0" } } } })
    expect.eq(r.first_sources, "reference")
    expect.eq(r.first_passed_over, "sg_1: inductor: correctness: EMISMATCH: trial 0")
    expect.eq(r.first_speedup.compile, 0.5)
    local plain = fuse_rows.row({ mode = "fuse", subgraphs = { count = 1 }, first_program = {
      verified = true, time_ms = 1.0, kernels = { { dir = "sg_1", source = "inductor", verified = true } } } })
    expect.eq(plain.first_passed_over, nil)
  end)

  it("count, in a fuse row, the kernels composed with their timing refused", function()
    local fuse_rows = require("agents.tools.sweep.fuse_rows")
    local why = "timing: EUNTRUSTED: the timed calls vary too much (p90/p10 above the limit)"
    local row = { name = "32_cvt", status = "done", fuse = fuse_rows.row({ mode = "fuse", subgraphs = { count = 2 },
      first_program = { verified = true, time_ms = 1.0, eager_ms = 2.0, kernels = {
        { dir = "sg_1", source = "inductor", verified = true, untimed = why },
        { dir = "sg_2", source = "inductor", verified = true, time_ms = 0.5 } } } }) }
    expect.same(row.fuse.first_untimed, { "sg_1: " .. why })
    local text = fuse_rows.table_text({ row }, fuse_rows.aggregate({ row }))
    expect.match(text, "| verified %(inductor; 1 kernel%(s%) untimed%) |")
  end)

  it("say, under a fuse table, why a verified program's baseline has no figure", function()
    local fuse_rows = require("agents.tools.sweep.fuse_rows")
    local function fuse_row(name, fp) return { name = name, status = "done", fuse = fuse_rows.row({ mode = "fuse",
      subgraphs = { count = 1 }, first_program = fp }) } end
    local rows = {
      fuse_row("45_gemm", { verified = true, time_ms = 2.0, eager_ms = 2.0,
        baseline_errors = { compile = "ERUN: InductorError: out of resource" } }),
      fuse_row("81_gemm", { verified = true, time_ms = 2.0, eager_ms = 2.0 }),
      fuse_row("1_conv", { verified = true, time_ms = 1.0, eager_ms = 2.0, compile_ms = 1.0 }),
    }
    local text = fuse_rows.table_text(rows, fuse_rows.aggregate(rows))
    expect.match(text, "%- 45_gemm: compile: ERUN: InductorError: out of resource")
    expect.match(text, "%- 81_gemm: compile: no figure and no reason recorded")
    expect.no_match(text, "%- 1_conv:")
    local agg = fuse_rows.aggregate({ rows[3] })
    expect.no_match(fuse_rows.table_text({ rows[3] }, agg), "baselines not measured")
  end)

  it("give no fast_p for a baseline that no problem measured", function()
    local agg = figures.aggregate({ row("a", true, 1.5, nil) })
    expect.eq(agg.fast_p.compile["1.0"], json.null)
    expect.eq(agg.fast_p.eager["1.0"], 1)
    expect.eq(agg.speedup.compile.n, 0)
    expect.match(figures.table_text({ row("a", true, 1.5, nil) }, agg), "fast_p vs compile: not measured")
  end)

  it("sum launches into problem time and GPU-hours, an interrupted one until its heartbeat", function()
    local r = figures.row({ name = "p" }, nil, { status = "failed", launches = {
      { started = 100, alive = 160, gpus = 2 },            -- killed: counted to its last heartbeat
      { started = 200, finished = 500, gpus = 2 } } })
    expect.eq(r.problem_s, 360)
    expect.near(r.gpu_hours, 720 / 3600, 1e-12)
    expect.eq(r.launches, 2)
  end)
end)

describe("sweep plan", function()
  it("lists problems from a folder (natural order), a list file and comma-joined paths", function()
    local dir = spec.tmpdir("sweep-plan")
    for _, n in ipairs({ "36_b.py", "4_a.py", "_skip.py", "notes.txt", "x.py" }) do fs.write(dir .. "/" .. n, "# p\n") end
    local paths = assert(plan_lib.problem_paths(dir))
    local names = {}
    for i, p in ipairs(paths) do names[i] = fs.basename(p) end
    expect.eq(table.concat(names, " "), "4_a.py 36_b.py x.py")
    fs.write(dir .. "/list.txt", "# showcase\n4_a.py\n\n  x.py  # last\n")
    expect.eq(#assert(plan_lib.problem_paths(dir .. "/list.txt")), 2)
    expect.eq(assert(plan_lib.problem_paths(dir .. "/4_a.py," .. dir .. "/x.py"))[2], fs.abspath(dir .. "/x.py"))
    local _, err = plan_lib.problem_paths(dir .. "/4_a.py," .. dir .. "/none.py")
    expect.match(err, "no problem file")
    fs.mkdir_p(dir .. "/other")
    fs.write(dir .. "/other/x.py", "# p\n")
    _, err = plan_lib.problem_paths(dir .. "/x.py," .. dir .. "/other/x.py")
    expect.match(err, "two problems are named x")
    proc.run({ "rm", "-rf", dir })
  end)

  it("maps a policy to its command line in one place", function()
    local plan = { dir = "/s", policy = "greedy", policy_args = { "--rounds", "2" } }
    local p = { name = "x", problem = "/p/x.py", kernel = "/k/x.py" }
    local argv = plan_lib.command(plan, p, { resume = "/s/runs/x/r1", devices = "0" })
    expect.match(argv[1], "/agents/beam%.lua$")
    expect.eq(table.concat(argv, " ", 2), "--policy greedy --problem /p/x.py --out /s/runs/x --kernel /k/x.py"
      .. " --resume /s/runs/x/r1 --devices 0 --rounds 2")
    plan.policy = "tune"
    argv = plan_lib.command(plan, p)
    expect.match(argv[1], "/agents/tune%.lua$")
    expect.eq(argv[2], "--problem", "tune.lua takes no --policy")
    local _, err = plan_lib.entry("nonsense")
    expect.match(err, "unknown policy")
    local tmp = spec.tmpdir("sweep-plan-t")
    fs.write(tmp .. "/x.py", "# p\n")
    local _, nerr = plan_lib.new({ problems = tmp .. "/x.py", policy = "tune", kernels = tmp .. "/none", out = tmp .. "/s" })
    expect.match(nerr, "the tune policy needs a kernel for x")
    -- an option the policy's script does not take would fail every run: the sweep does not start
    local _, ferr = plan_lib.new({ problems = tmp .. "/x.py", policy = "fuse", kernels = tmp, out = tmp .. "/s" })
    expect.match(ferr, "%-%-kernels: agents/fuse%.lua starts from the problem alone")
    _, ferr = plan_lib.new({ problems = tmp .. "/x.py", policy = "fuse", out = tmp .. "/s",
      policy_args = { "--dtype", "bf16", "--rounds", "2", "--no-llm" } })
    expect.match(ferr, "the runs' option %-%-rounds: agents/fuse%.lua does not take it")
    _, ferr = plan_lib.new({ problems = tmp .. "/x.py", policy = "greedy", kernels = tmp, out = tmp .. "/s",
      policy_args = { "--no-llm" } })
    expect.match(ferr, "the runs' option %-%-no%-llm: agents/beam%.lua does not take it")
    local ok = plan_lib.new({ problems = tmp .. "/x.py", policy = "fuse", out = tmp .. "/s",
      policy_args = { "--dtype", "bf16", "--first", "reference", "--no-llm" }, db = tmp .. "/k.db" })
    expect.truthy(ok, "fuse's own options and the shared ones it takes")
    ok = plan_lib.new({ problems = tmp .. "/x.py", policy = "greedy", kernels = tmp, out = tmp .. "/s",
      policy_args = { "--rounds", "2", "--tuner" }, db = tmp .. "/k.db" })
    expect.truthy(ok, "beam.lua's options")
    proc.run({ "rm", "-rf", tmp })
  end)

  it("deals GPUs out to concurrent runs and says when runs must share one", function()
    local s = local_run.slots("0,1,2,3", 2)
    expect.eq(s[1].devices .. " " .. s[2].devices, "0,2 1,3")
    expect.eq(s[1].gpus, 2)
    local shared, warn = local_run.slots("0,1", 3)
    expect.eq(#shared, 3)
    expect.eq(shared[3].devices, "0")
    expect.match(warn, "share GPUs")
    local cpu = local_run.slots("cpu", 2)
    expect.eq(cpu[2].devices, "cpu")
    expect.eq(cpu[2].gpus, 0)
  end)

  it("shares TorchInductor's compile workers out among the runs at once", function()
    if os.getenv("TORCHINDUCTOR_COMPILE_THREADS") then return end -- the user's value is kept
    local cores = require("kagent.gpu").auto_workers_per_gpu({ gpus = 1 }).cores
    expect.eq(next(local_run.run_env(1)), nil)
    local n = cores + 1 -- more runs than cores: each still gets one
    expect.eq(local_run.run_env(n).TORCHINDUCTOR_COMPILE_THREADS, "1")
    expect.eq(local_run.run_env(2).TORCHINDUCTOR_COMPILE_THREADS, tostring(math.max(1, math.floor(cores / 2))))
  end)

  it("builds the Slurm submission: array ranges, throttle, GPUs only outside CPU mode", function()
    expect.eq(slurm.ranges({ 5, 1, 2, 3, 7, 8 }), "1-3,5,7-8")
    local plan = { dir = "/s/sweep_x", devices = "cpu", slurm = { array_limit = 2, partition = "gpu", gpus_per_task = 1,
      sbatch_args = "--qos=low --mem=8G" } }
    local argv = table.concat(slurm.sbatch_argv(plan, { 1, 2, 4 }, "/s/task.sh"), " ")
    expect.match(argv, "%-%-array=1%-2,4%%2 ")
    expect.match(argv, "%-%-partition=gpu")
    expect.no_match(argv, "gpus%-per%-task", "no GPU in CPU mode")
    expect.match(argv, "%-%-qos=low %-%-mem=8G /s/task%.sh$")
    plan.devices = json.null
    expect.match(table.concat(slurm.sbatch_argv(plan, { 1 }, "/s/task.sh"), " "), "%-%-gpus%-per%-task=1")
  end)
end)

local have_torch = require("fake_session").cpu().have_torch

local function run_sweep(argv, env, timeout)
  local p = sweep.spawn_sweep(argv, env)
  return p:wait(timeout or 600)
end

describe("agents/sweep.lua on this machine (CPU mode, FAKE LLM server)", function()
  it("runs problems two at a time, resumes after being killed, and skips finished problems", function()
    if not have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("sweep-local")
    local server, port = fake.start(sweep.script(2.5), dir)
    local env = sweep.env(port, spec.python)
    local out, db = dir .. "/sweep", dir .. "/sweep.db"
    local names = { "relu_signed", "softmax", "matmul_small" }
    local argv = sweep.argv(out, db, names, { "--max-concurrent", "2" })

    -- first session: the driver is killed with SIGKILL once relu_signed has saved its first
    -- round, which leaves its runs running without it
    local p = sweep.spawn_sweep(argv, env)
    local run_dir = sweep.wait_for(function() return sweep.round_done(out, "relu_signed") end, 300, "relu_signed's first round")
    p:kill("KILL")
    local r1 = p:wait(30)
    expect.eq(r1.signal, 9)
    local killed = sweep.record(out, "relu_signed")
    expect.eq(killed.status, "running", "the record shows the launch that was under way")
    local orphan = killed.launches[1].pid
    expect.truthy(orphan and fs.exists("/proc/" .. orphan), "the run outlived its driver")

    -- second session: same command; relu_signed resumes from its run folder
    local r2 = sweep.complete(argv, env, out, #names)
    local rec = sweep.record(out, "relu_signed")
    expect.falsy(fs.exists("/proc/" .. orphan) and (fs.read("/proc/" .. orphan .. "/cmdline") or ""):find(out, 1, true),
      "the left-behind run was stopped before the problem started again")
    expect.truthy(#rec.launches >= 2)
    expect.eq(rec.launches[1].resumed, json.null)
    expect.eq(rec.launches[2].resumed, run_dir, "launch 2 resumed the interrupted run")
    expect.eq(rec.run_dir, run_dir, "and finished it in the same folder")
    expect.eq(rec.status, "done")
    expect.match(r2.stderr, "resumed")
    expect.match(r2.stdout, string.format("correct %d/3", sweep.sweep_json(out).aggregate.correct))

    local s = json.decode(fs.read(out .. "/sweep.json"))
    expect.eq(#s.results, 3)
    expect.eq(s.aggregate.finished, 3)
    expect.eq(s.aggregate.problems, 3)
    expect.eq(s.aggregate.speedup.eager.n, s.aggregate.correct, "an eager speedup for each correct problem")
    expect.truthy(s.aggregate.tokens > 0, "tokens summed")
    expect.truthy(#s.sessions >= 2)
    expect.truthy(s.definitions.fast_p, "definitions written")
    expect.truthy(fs.exists(out .. "/table.md"))

    -- the runs are in the sweep's database, found by their uid, finished, with their attempts
    local m = assert(mem.open(db))
    for _, r in ipairs(s.results) do
      local run = m:query("SELECT status FROM runs WHERE uid = ?", { r.run_uid })[1]
      expect.eq(run and run.status, "done", r.name .. "'s run in memory")
      local keys = sweep.attempt_keys(m, r.run_uid)
      expect.truthy(#keys >= 3, r.name .. ": input and two optimizer attempts recorded (" .. #keys .. ")")
    end
    m:close()

    -- third session: everything is finished, nothing runs again
    local launches = {}
    for _, n in ipairs(names) do launches[n] = #sweep.record(out, n).launches end
    local r3 = sweep.check_exit(run_sweep(argv, env), out)
    for _, n in ipairs(names) do
      expect.eq(#sweep.record(out, n).launches, launches[n], n .. " is finished and not launched again")
    end
    expect.match(r3.stderr, "resumed: 3 finished before")
    expect.match(r3.stdout, "finished 3, failed 0")
    -- CPU mode profiles no GPU kernel: each row's own share is "?" with the evaluator's reason
    expect.match(r3.stdout, "\n%- own %? for [^\n]*: CPU mode: no GPU kernels are profiled")

    -- the folder's sweep cannot be changed into another, nor run by two drivers at once
    local other = sweep.argv(out, db, { "relu_signed", "softmax" })
    local r4 = run_sweep(other, env)
    expect.eq(r4.code, 2)
    expect.match(r4.stderr, "holds a sweep already, and %-%-problems differs")
    local more_rounds = sweep.argv(out, db, names, { "--rounds", "3" })
    expect.match(run_sweep(more_rounds, env).stderr, "the runs' options differ")
    local host = fs.read("/proc/sys/kernel/hostname"):gsub("%s+$", "")
    local holder = assert(proc.spawn({ "sh", "-c", "sleep 60", "agents/sweep.lua" }))
    fs.write(out .. "/driver.json", json.encode({ host = host, pid = holder.pid }))
    local r5 = run_sweep(argv, env)
    holder:kill("KILL")
    expect.eq(r5.code, 2)
    expect.match(r5.stderr, "another driver %(pid " .. holder.pid .. "%) is running this sweep")
    server:kill()
    proc.run({ "rm", "-rf", dir })
  end, { timeout = 900 })

  it("stops a run past --time, says so in its row, and runs it again when the sweep runs again", function()
    if not have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("sweep-time")
    local env = { KAGENT_PYTHON = spec.python, KAGENT_DB = false, KAGENT_SWEEP_HEARTBEAT = "1" }
    -- a problem whose Model never returns: its run waits on the evaluator until its job timeout
    local hang = kagent.root .. "/tests/fixtures/agent/problems/hanging_model.py"
    local out = dir .. "/sweep"
    local argv = { "--problems", hang, "--policy", "fuse", "--devices", "cpu", "--out", out, "--db", dir .. "/s.db",
      "--time", "0:04", "--", "--no-llm", "--job-timeout", "300" }
    local t0 = kagent.time.now()
    local r = sweep.check_exit(run_sweep(argv, env, 120), out)
    expect.truthy(kagent.time.now() - t0 < 60, "stopped at the limit, not at the job timeout")
    expect.eq(r.code, 1)
    local rec = sweep.record(out, "hanging_model")
    expect.eq(rec.status, "failed")
    expect.eq(rec.launches[1].timed_out, true)
    expect.match(rec.error, "^time limit: the run passed the sweep's %-%-time %(4 s%)")
    expect.match(r.stdout, "hanging_model: time limit: the run passed the sweep's %-%-time %(4 s%)")
    local pid = rec.launches[1].pid
    expect.falsy(fs.exists("/proc/" .. pid) and (fs.read("/proc/" .. pid .. "/cmdline") or ""):find(out, 1, true),
      "the run is gone")
    -- a limit that is not one is refused before anything runs; the next session runs the problem
    -- again (the fuse run saved no state to resume from), under the same limit
    local bad = run_sweep({ "--problems", hang, "--policy", "fuse", "--devices", "cpu", "--out", dir .. "/b",
      "--time", "1::2", "--", "--no-llm" }, env, 60)
    expect.eq(bad.code, 2)
    expect.match(bad.stderr, "%-%-time 1::2: not a time limit")
    expect.falsy(fs.exists(dir .. "/b"), "nothing started")
    sweep.check_exit(run_sweep(argv, env, 120), out)
    rec = sweep.record(out, "hanging_model")
    expect.eq(#rec.launches, 2)
    expect.eq(rec.launches[2].timed_out, true)
    expect.eq(rec.status, "failed")
    proc.run({ "rm", "-rf", dir })
  end, { timeout = 300 })

  it("refuses what it cannot run, with the reason", function()
    local dir = spec.tmpdir("sweep-errors")
    local noenv = { KAGENT_LLM_URL = false, KAGENT_MODEL = false, OPENAI_API_KEY = false, ANTHROPIC_API_KEY = false,
      OPENAI_BASE_URL = false, ANTHROPIC_BASE_URL = false }
    local r = run_sweep({ "--problems", sweep.problem_list({ "softmax" }), "--policy", "beam", "--out", dir .. "/a" }, noenv, 60)
    expect.eq(r.code, 2)
    expect.match(r.stderr, "policy beam needs an LLM")
    r = run_sweep({ "--problems", sweep.problem_list({ "softmax" }), "--policy", "tune", "--out", dir .. "/b" }, noenv, 60)
    expect.eq(r.code, 2)
    expect.match(r.stderr, "the tune policy needs a kernel for softmax")
    r = run_sweep({ "--problems", sweep.problem_list({ "softmax" }), "--policy", "tune", "--rounds", "x" }, noenv, 60)
    expect.eq(r.code, 2)
    expect.match(r.stderr, "%-%-rounds expects a whole number >= 0, got .x.")
    r = run_sweep({ "--policy", "tune", "--out", dir .. "/c" }, noenv, 60)
    expect.match(r.stderr, "%-%-problems is required")
    fs.write(dir .. "/afile", "x")
    r = run_sweep({ "--problems", sweep.problem_list({ "softmax" }), "--policy", "tune", "--kernels", kagent.root
      .. "/examples/kernels/cpu", "--devices", "cpu", "--out", dir .. "/afile" }, noenv, 60)
    expect.eq(r.code, 2, r.stderr)
    expect.match(r.stderr, "%-%-out .*afile is not a folder")
    r = run_sweep({ "--problems", sweep.problem_list({ "softmax" }), "--policy", "tune", "--kernels", kagent.root
      .. "/examples/kernels/cpu", "--devices", "cpu", "--db", dir, "--out", dir .. "/d" }, noenv, 60)
    expect.eq(r.code, 2, r.stderr)
    expect.match(r.stderr, "the memory database .* cannot be written")
    expect.falsy(fs.exists(dir .. "/d"), "nothing started")
    proc.run({ "rm", "-rf", dir })
  end, { timeout = 300 })
end)
