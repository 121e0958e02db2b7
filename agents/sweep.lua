-- agents/sweep.lua: a policy over many problems, on this machine or as a Slurm job array.
--   kagent-rt agents/sweep.lua --problems DIR|LIST --policy NAME [--kernels DIR] [--out DIR]
--       [--max-concurrent N] [--slurm [--partition P] [--gpus-per-task 1] [--array-limit N]]
--       [policy options: --rounds 8 --dtype fp32 ...] [-- more arguments for each run]
--   kagent-rt agents/sweep.lua --kernelbench DIR [--levels 1,2,3] [--problems NAMES] [--policy NAME] ...
--   kagent-rt agents/sweep.lua --out DIR --pack DEST        kagent-rt agents/sweep.lua --resume DEST
-- Writes one sweep folder: a run folder per problem, sweep.json (plan, per-problem figures,
-- aggregates and their definitions) and table.md, both rewritten after every problem. Running it
-- again on the same --out (or --resume DIR) resumes: finished problems are kept, interrupted ones
-- continue with their run's --resume. --pack writes the small folder that travels.
-- docs/sweeps.md defines every figure and says how to run on a cluster.
local fs = require("kagent.fs")
local json = require("kagent.json")
local ktime = require("kagent.time")
local run_lib = require("agents.run")
local run_args = require("agents.tools.sweep.run_args")
local plan_lib = require("agents.tools.sweep.plan")
local report = require("agents.tools.sweep.report")

local PROG = "agents/sweep.lua"

local SPEC = {
  problems = { type = "string", help = "a folder (its *.py), a list file (one path a line), or .py paths (comma-joined or several)" },
  policy = { type = "string", help = "beam | greedy | tune | skill | fuse | path/to/policy.lua" },
  kernels = { type = "string", help = "folder of first kernels named <problem>.py (tune needs one per problem; fuse takes none)" },
  out = { type = "string", help = "the sweep folder (default runs/sweep_<policy>_<UTC time>); a sweep there is resumed" },
  db = { type = "string", help = "the sweep's memory database (default KAGENT_DB, else runs/kagent.db)" },
  devices = { type = "string", help = "GPUs dealt out to the runs: \"all\", \"0,1\" (positions among the GPUs this process may use: CUDA_VISIBLE_DEVICES, else all nvidia-smi lists), or \"cpu\" (default: all GPUs here, else cpu)" },
  ["max-concurrent"] = { type = "integer", min = 1, help = "problems run at once here (default one per GPU; 1 in CPU mode)" },
  slurm = { type = "boolean", default = false, help = "run as a Slurm job array, one problem per task" },
  partition = { type = "string", help = "Slurm partition" },
  ["gpus-per-task"] = { type = "integer", min = 0, help = "Slurm: GPUs per task (default 1; none in CPU mode)" },
  ["cpus-per-task"] = { type = "integer", min = 1, help = "Slurm: CPUs per task" },
  ["array-limit"] = { type = "integer", min = 1, help = "Slurm: tasks running at once (--array=...%N)" },
  time = { type = "string", help = "time limit of each problem's run, in Slurm's formats (MINUTES, MM:SS, HH:MM:SS, D-HH:MM:SS): on this machine a run past it is stopped and its row says so (running the sweep again starts it again, or resumes it where the run saved its state); on Slurm, sbatch --time" },
  ["sbatch-args"] = { type = "string", help = "Slurm: more sbatch arguments, space-separated" },
  retries = { type = "integer", min = 0, help = "Slurm: resubmissions of a task that ends without a finished run (default 2)" },
  poll = { type = "number", above = 0, help = "Slurm: seconds between squeue polls (default 30)" },
  task = { type = "integer", min = 1, help = "(run by Slurm tasks) run problem N of the sweep in --out" },
  kernelbench = { type = "string", help = "a KernelBench folder (level1/ level2/ level3/): its problems by --levels, or those --problems names; default policy: fuse --no-llm (the LLM-free floor); on --resume, this machine's copy" },
  levels = { type = "string", help = "with --kernelbench: the levels, comma-joined (default 1,2,3)" },
  resume = { type = "string", help = "continue the sweep in this folder (a sweep folder, or one --pack wrote)" },
  pack = { type = "string", help = "write the sweep of --out (or --resume) as a small folder that travels: sweep.json, table.md and each finished run's summary.json and best kernel; then stop" },
}
local HOW = { usage = "kagent-rt agents/sweep.lua --problems DIR|LIST --policy NAME | --kernelbench DIR [--levels 1,2,3] "
    .. "[options] [-- more arguments for each run]",
  about = "A policy over many problems, on this machine or as a Slurm job array: one run per problem, a sweep "
    .. "folder with every run, sweep.json and table.md. Running it again on the same --out resumes it.",
  epilog = "-- ARGS...: passed as they are to every run; an option its policy's script does not take stops the sweep "
    .. "before it starts. sweep.json and table.md are rewritten after every problem; --pack DEST writes the sweep as a small "
    .. "folder that --resume DEST continues (on another machine: with --kernelbench and --db of that machine). "
    .. "Exit status: 0 every problem finished with a verified kernel, 1 otherwise, 2 bad input. "
    .. "Figures and their definitions, and running on Slurm: docs/sweeps.md",
  positional = "problem files" }
-- The options of the runs themselves, passed on as given (the policy's defaults apply otherwise).
local PASS = run_args.add(SPEC)

local function fail(msg, code)
  io.stderr:write(PROG .. ": " .. msg .. "\n")
  return code or 2
end

local function same_list(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end

-- resume_check(plan, opts, pass) -> nil, or why the command line does not fit the sweep in --out
local function resume_check(plan, opts, pass)
  if opts.problems then
    local paths = plan_lib.problem_paths(opts.problems) or {}
    local had = {}
    for i, p in ipairs(plan.problems) do had[i] = p.problem end
    if not same_list(paths, had) then return "--problems differs from the sweep's problems" end
  end
  if opts.policy and opts.policy ~= plan.policy and fs.abspath(opts.policy) ~= plan.policy then
    return "--policy " .. opts.policy .. " differs from the sweep's (" .. plan.policy .. ")"
  end
  if #pass > 0 and not same_list(pass, plan.policy_args) then
    return "the runs' options differ from the sweep's (" .. table.concat(plan.policy_args, " ") .. ")"
  end
  if opts.slurm and plan.mode ~= "slurm" then return "the sweep ran locally; --slurm cannot take it over" end
  -- a sweep carried to another machine (--resume) takes that machine's database
  if opts.db and not opts.resume and fs.abspath(opts.db) ~= plan.db then return "--db differs from the sweep's (" .. plan.db .. ")" end
  if opts.devices and (opts.devices == "cpu") ~= (plan.devices == "cpu") then
    return "--devices " .. opts.devices .. " changes between CPU mode and GPUs"
  end
end

-- slurm_options(opts, base) -> the Slurm settings: base (the sweep's, or the defaults) with the
-- options given on this command line over it, so a resumed sweep can change them.
local SLURM_KEYS = { "partition", "gpus_per_task", "cpus_per_task", "array_limit", "time", "sbatch_args", "retries", "poll" }
local function slurm_options(opts, base)
  local o = {}
  for k, v in pairs(base or { gpus_per_task = 1, retries = 2, poll = 30 }) do o[k] = v end
  for _, k in ipairs(SLURM_KEYS) do if opts[k] ~= nil then o[k] = opts[k] end end
  return o
end

-- keep_alive(plan, session): notes every 15 s that this session still runs, so a session that
-- is killed counts in the sweep's wall time up to then, not up to the next one.
local function keep_alive(plan, session)
  local now = ktime.wall()
  if now - (session.alive or 0) >= 15 then
    session.alive = now
    plan_lib.save(plan)
  end
end

-- wall_s(plan) -> the time the sweep's drivers ran, summed over their sessions
local function wall_s(plan)
  local wall = 0
  for _, s in ipairs(plan.sessions or {}) do wall = wall + ((s.finished or s.alive or s.started) - s.started) end
  return wall
end

-- write_results(plan, cpu) -> the table's text: sweep.json and table.md rewritten from the runs
local function write_results(plan, cpu)
  local rows, agg = report.results(plan, { wall_s = wall_s(plan), cpu = cpu == true })
  return report.write(plan, rows, agg), agg
end

-- pack_main(opts) -> exit status: the sweep in --out written as the folder that travels
local function pack_main(opts)
  local plan = opts.out and plan_lib.load(opts.out)
  if not plan then return fail("--pack needs --out DIR (or --resume DIR), the folder of a sweep (no sweep.json there)") end
  write_results(plan, type(plan.aggregate) == "table" and plan.aggregate.cpu_mode == true)
  local res, err = require("agents.tools.sweep.pack").pack(plan, opts.pack)
  if not res then return fail(err, 1) end
  print(string.format("packed %s into %s: %d finished run(s), %.1f kB; continue with: kagent-rt agents/sweep.lua --resume %s "
    .. "[--kernelbench DIR] [--db FILE]", plan.dir, opts.pack, res.runs, res.bytes / 1024, opts.pack))
  return 0
end

local function run_local(plan, line, session)
  local local_run = require("agents.tools.sweep.local_run")
  local slots, warn = local_run.slots(plan.devices ~= json.null and plan.devices or nil,
    plan.max_concurrent ~= json.null and plan.max_concurrent or nil)
  if warn then line:say(PROG .. ": " .. warn) end
  local todo = {}
  for _, p in ipairs(plan.problems) do
    if not require("agents.tools.sweep.task").run_state(plan, p).done then todo[#todo + 1] = p end
  end
  local running = {}
  local function status()
    local list = {}
    for _, p in ipairs(plan.problems) do if running[p] then list[#list + 1] = p end end
    line:show(report.status_text(plan, list))
    keep_alive(plan, session)
  end
  local ticker = kagent.task.spawn(function()
    while true do
      status()
      kagent.task.sleep(2)
    end
  end)
  local limit = require("agents.tools.sweep.time_limit").seconds(plan.run_time ~= json.null and plan.run_time or nil)
  local cpu = slots[1].devices == "cpu"
  local_run.run(plan, todo, { db = plan.db, slots = slots, running = running, time_limit = limit or nil,
    on_done = function() write_results(plan, cpu) end })
  kagent.task.kill(ticker)
  status()
  return cpu
end

local function run_slurm(plan, line, session)
  local slurm = require("agents.tools.sweep.slurm")
  local ok, why = slurm.available()
  if not ok then return nil, why end
  local db, derr = require("kagent.mem").open(plan.db)
  if not db then return nil, "memory: " .. tostring(derr) end
  local seed, serr = slurm.seed(plan, db)
  if not seed then return nil, "database seed: " .. tostring(serr) end
  local o = plan.slurm
  local done_seen  -- problems finished when the table was last written
  local tries, err = slurm.drive(plan, { retries = o.retries, poll = o.poll, log = function(m) line:say("[slurm] " .. m) end,
    on_status = function(active, info)
      local by = {}
      for _, t in pairs(active) do by[t.state] = (by[t.state] or 0) + 1 end
      local states = {}
      for s, n in pairs(by) do states[#states + 1] = s .. " " .. n end
      table.sort(states)
      local running = {}
      for _, p in ipairs(plan.problems) do
        if active[p.index] and active[p.index].state == "RUNNING" then running[#running + 1] = p end
      end
      local done_now = report.counts(plan)
      if done_now ~= done_seen then
        done_seen = done_now
        write_results(plan, plan.devices == "cpu")
      end
      line:show(report.status_text(plan, running, "slurm: " .. (#states > 0 and table.concat(states, ", ") or "none queued")
        .. (info.resubmitted > 0 and (", resubmitted " .. info.resubmitted) or "")))
      keep_alive(plan, session)
    end })
  if not tries then return nil, err end
  local merged, merr = slurm.merge(plan, db)
  db:close()
  if not merged then return nil, merr end
  plan.merged = merged
  local total = {}
  for _, counts in pairs(merged) do
    for t, n in pairs(counts) do total[t] = (total[t] or 0) + n end
  end
  line:say(string.format("[slurm] merged %d task database(s) into %s: %d run(s), %d attempt(s) added",
    (function() local n = 0 for _ in pairs(merged) do n = n + 1 end return n end)(), plan.db, total.runs or 0, total.attempts or 0))
  return plan.devices == "cpu"
end

-- claim(plan) -> true, or nil and why: one driver per sweep folder on a host at a time (two
-- would launch the same problems twice). The claim is driver.json: host and process id.
local function claim(plan)
  local path = fs.join(plan.dir, "driver.json")
  local host = (fs.read("/proc/sys/kernel/hostname") or "?"):gsub("%s+$", "")
  local old = json.decode(fs.read(path) or "null")
  if type(old) == "table" and old.host == host and old.pid then
    local cmd = fs.read("/proc/" .. tostring(old.pid) .. "/cmdline") or ""
    if cmd:find("sweep.lua", 1, true) then
      return nil, string.format("another driver (pid %s) is running this sweep", tostring(old.pid))
    end
  end
  local pid = (fs.read("/proc/self/stat") or ""):match("^(%d+)")
  fs.write(path, json.encode({ host = host, pid = tonumber(pid), started = ktime.wall() }) .. "\n")
  return true
end

local function main(argv)
  local own, extra = {}, {}
  local after = false
  for _, a in ipairs(argv) do
    if after then extra[#extra + 1] = a elseif a == "--" then after = true else own[#own + 1] = a end
  end
  local opts, _, pcode = run_lib.parse(PROG, own, SPEC, HOW)
  if not opts then return pcode end
  -- a shell glob after --problems gives several .py paths: they are all problems
  for _, a in ipairs(opts._positional) do
    if not (a:match("%.py$") and opts.problems and opts.problems:match("%.py$")) then
      return fail("unexpected argument " .. a .. " (problem files follow --problems; runs' own arguments go after --)")
    end
    opts.problems = opts.problems .. "," .. a
  end
  if opts.task then
    local plan = opts.out and plan_lib.load(opts.out)
    if not plan then return fail("--task needs --out, the folder of a sweep (no sweep.json there)") end
    return require("agents.tools.sweep.slurm").task_main(plan, opts.task)
  end

  local kb = require("agents.tools.sweep.kernelbench")
  if opts.resume then
    if opts.out and fs.abspath(opts.out) ~= fs.abspath(opts.resume) then return fail("give --resume or --out, not both") end
    if not plan_lib.load(opts.resume) then return fail("--resume " .. opts.resume .. ": no sweep.json there (a sweep folder, or one --pack wrote)") end
    opts.out = opts.resume
  end
  if opts.pack then return pack_main(opts) end
  if opts.levels and not opts.kernelbench then return fail("--levels needs --kernelbench DIR") end
  if opts.kernelbench and not (opts.resume and not opts.levels and not opts.problems) then
    local list, kerr = kb.problems(opts.kernelbench, opts.levels, opts.problems)
    if not list then return fail(kerr) end
    opts.problems = list
  end
  if opts.time then
    local _, terr = require("agents.tools.sweep.time_limit").seconds(opts.time)
    if terr then return fail(terr) end
  end
  local pass = run_args.args(PASS, opts, extra)
  if opts.kernelbench and not opts.policy and not (opts.out and plan_lib.load(opts.out)) then
    -- the LLM-free floor for every level, unless a policy is named
    opts.policy = kb.DEFAULT_POLICY
    local has = {}
    for _, a in ipairs(pass) do has[a] = true end
    for _, a in ipairs(kb.DEFAULT_ARGS) do if not has[a] then pass[#pass + 1] = a end end
  end
  local plan = opts.out and plan_lib.load(opts.out)
  if plan then
    local rerr = kb.reroot(plan, opts.kernelbench)
    if rerr then return fail(opts.out .. ": " .. rerr) end
    if opts.resume and opts.db then plan.db = fs.abspath(opts.db) end
    local why = resume_check(plan, opts, pass)
    if why then return fail(string.format("%s holds a sweep already, and %s; use another --out", opts.out, why)) end
    -- how it runs may change; what it runs may not
    if plan.mode == "slurm" then plan.slurm = slurm_options(opts, plan.slurm) end
    if opts.max_concurrent then plan.max_concurrent = opts.max_concurrent end
    if opts.devices then plan.devices = opts.devices end
    if opts.time and plan.mode ~= "slurm" then plan.run_time = opts.time end
  else
    if not opts.problems then return fail("--problems is required, or --kernelbench DIR (--help lists the options)") end
    if not opts.policy then return fail("--policy is required (beam, greedy, tune, skill, fuse or a policy file)") end
    local out = opts.out or fs.join("runs", string.format("sweep_%s_%s", fs.basename(opts.policy):gsub("%.lua$", ""),
      os.date("!%Y%m%d-%H%M%S")))
    local perr
    plan, perr = plan_lib.new({ problems = opts.problems, policy = opts.policy, kernels = opts.kernels, out = out,
      policy_args = pass, db = opts.db or require("kagent.mem").default_path(), devices = opts.devices,
      max_concurrent = opts.max_concurrent, slurm = opts.slurm and slurm_options(opts) or nil,
      run_time = not opts.slurm and opts.time or nil })
    if not plan then return fail(perr) end
    if opts.kernelbench then kb.mark(plan, opts.kernelbench) end
  end
  if plan_lib.needs_llm(plan.policy, plan.policy_args) then
    local configured, what = require("kagent.llm").configured()
    if not configured then
      return fail(string.format("policy %s needs an LLM: %s. The tune policy needs none.", plan.policy, tostring(what)))
    end
  end

  local done_before = 0
  for _, p in ipairs(plan.problems) do
    if require("agents.tools.sweep.task").run_state(plan, p).done then done_before = done_before + 1 end
  end
  -- every run writes the sweep's memory database: one that cannot be written fails them all
  local db, _, dcode = run_lib.open_memory(PROG, plan.db)
  if not db then return dcode end
  db:close()
  local _, oerr, ocode = run_lib.out_dir(PROG, plan.dir)
  if oerr then return ocode end
  local claimed, cerr = claim(plan)
  if not claimed then return fail(plan.dir .. ": " .. cerr) end
  plan.sessions = plan.sessions or {}
  local session = { started = ktime.wall() }
  plan.sessions[#plan.sessions + 1] = session
  plan_lib.save(plan)
  io.stderr:write(string.format("sweep %s: %d problem(s), policy %s, %s%s; database %s\n", plan.dir, #plan.problems,
    plan.policy, plan.mode == "slurm" and "Slurm job array" or "this machine",
    #plan.sessions > 1 and string.format(" (resumed: %d finished before)", done_before) or "", plan.db))

  local line = report.line()
  local cpu, rerr
  if plan.mode == "slurm" then cpu, rerr = run_slurm(plan, line, session) else cpu = run_local(plan, line, session) end
  line:finish()
  session.finished = ktime.wall()
  local text, agg = write_results(plan, cpu)
  print(text)
  print(string.format("\nsweep folder: %s (sweep.json, table.md, index.html)", plan.dir))
  if rerr then return fail(rerr, 1) end
  return agg.correct == agg.problems and agg.finished == agg.problems and 0 or 1
end

return main(kagent.args)
