-- Running a sweep on a Slurm cluster: one job array, one problem per task. Slurm schedules; this
-- file only submits, watches (squeue; sacct or scontrol for how a task ended), resubmits the
-- problems whose task ended without a finished run, and merges the tasks' databases at the end.
-- Each task runs `kagent-rt agents/sweep.lua --task N --out SWEEP`, which runs problem N exactly
-- as a local sweep does (agents/tools/sweep/task.lua) with its own database, tasks/<name>.db.
local fs = require("kagent.fs")
local json = require("kagent.json")
local proc = require("kagent.proc")
local ktime = require("kagent.time")
local plan_lib = require("agents.tools.sweep.plan")
local task_lib = require("agents.tools.sweep.task")

local M = {}

local function run(argv, timeout)
  local r, err = proc.run(argv, { timeout = timeout or 120 })
  if not r then return nil, err end
  if r.code ~= 0 then
    -- the end of what it said, trimmed in one pass (a "%s+$" pattern is quadratic in a long run
    -- of spaces, and a command's stderr is up to proc's max_output)
    local tail = (r.stderr or ""):sub(-2000)
    local last = #tail
    while last > 0 and tail:find("^%s", last) do last = last - 1 end
    return nil, string.format("%s exited %s: %s", argv[1], tostring(r.code), tail:sub(1, last))
  end
  return r.stdout
end

-- available() -> true, or false and why
function M.available()
  for _, cmd in ipairs({ "sbatch", "squeue" }) do
    local r = proc.run({ "sh", "-c", "command -v " .. cmd }, { timeout = 10 })
    if not (r and r.code == 0) then return false, cmd .. " is not on PATH (--slurm needs Slurm's client commands)" end
  end
  return true
end

-- ranges({1,2,3,5}) -> "1-3,5"
function M.ranges(indices)
  local s = {}
  for i, v in ipairs(indices) do s[i] = v end
  table.sort(s)
  local out, i = {}, 1
  while i <= #s do
    local j = i
    while j < #s and s[j + 1] == s[j] + 1 do j = j + 1 end
    out[#out + 1] = i == j and tostring(s[i]) or (s[i] .. "-" .. s[j])
    i = j + 1
  end
  return table.concat(out, ",")
end

local function dir(plan, ...) return fs.join(plan.dir, "slurm", ...) end

function M.task_db(plan, p) return plan_lib.task_path(plan, p, ".db") end

function M.job_name(plan)
  return ("kagent-sweep-" .. fs.basename(plan.dir)):gsub("[^%w%-_.]", "_"):sub(1, 60)
end

local function shell_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- The batch script every task runs; the array index picks the problem.
function M.batch_script(plan)
  local bin = task_lib.binary()
  if not bin then return nil, "cannot find the kagent-rt binary's path (set KAGENT_BIN)" end
  local path = dir(plan, "task.sh")
  fs.mkdir_p(dir(plan))
  fs.write(path, table.concat({
    "#!/bin/sh",
    "# A kagent-rt sweep task: runs problem number $SLURM_ARRAY_TASK_ID of " .. plan.dir .. "/sweep.json",
    "exec " .. shell_quote(bin) .. " " .. shell_quote(fs.abspath(kagent.resolve("agents/sweep.lua")))
      .. ' --task "$SLURM_ARRAY_TASK_ID" --out ' .. shell_quote(plan.dir),
    "" }, "\n"))
  proc.run({ "chmod", "+x", path })
  return path
end

function M.load_jobs(plan)
  local s = fs.read(dir(plan, "jobs.json"))
  local t = s and json.decode(s)
  return type(t) == "table" and t or {}
end

local function save_jobs(plan, jobs)
  fs.write(dir(plan, "jobs.json"), json.encode(jobs, { pretty = true }) .. "\n")
end

-- sbatch_argv(plan, indices, script) -> the sbatch command line for these problems
function M.sbatch_argv(plan, indices, script)
  local o = plan.slurm
  local cpu = plan.devices == "cpu"
  local array = M.ranges(indices) .. (o.array_limit and ("%" .. o.array_limit) or "")
  local argv = { "sbatch", "--parsable", "--job-name=" .. M.job_name(plan), "--array=" .. array,
    "--output=" .. fs.join(plan.dir, "logs", "slurm-%A_%a.out"), "--chdir=" .. fs.abspath("."), "--ntasks=1" }
  if o.partition then argv[#argv + 1] = "--partition=" .. o.partition end
  if not cpu then argv[#argv + 1] = "--gpus-per-task=" .. tostring(o.gpus_per_task or 1) end
  if o.cpus_per_task then argv[#argv + 1] = "--cpus-per-task=" .. tostring(o.cpus_per_task) end
  if o.time then argv[#argv + 1] = "--time=" .. o.time end
  for a in (o.sbatch_args or ""):gmatch("%S+") do argv[#argv + 1] = a end
  argv[#argv + 1] = script
  return argv
end

-- submit(plan, indices) -> job id, or nil, message. Recorded in slurm/jobs.json.
function M.submit(plan, indices)
  local script, serr = M.batch_script(plan)
  if not script then return nil, serr end
  local out, err = run(M.sbatch_argv(plan, indices, script))
  if not out then return nil, err end
  local id = out:match("^%s*(%d+)")
  if not id then return nil, "sbatch printed no job id: " .. out end
  local jobs = M.load_jobs(plan)
  jobs[#jobs + 1] = { id = id, indices = indices, submitted = ktime.wall() }
  save_jobs(plan, jobs)
  return id
end

-- queue(plan, jobs) -> {[problem index] = {task = "123_4", state = "RUNNING", reason}} for the
-- tasks of our jobs that Slurm still holds (pending, running, requeued...), or nil, message.
function M.queue(plan, jobs)
  local ours = {}
  for _, j in ipairs(jobs) do ours[tostring(j.id)] = true end
  local out, err = run({ "squeue", "-h", "-r", "--name=" .. M.job_name(plan), "-o", "%i|%T|%r" })
  if not out then return nil, err end
  local active = {}
  for line in out:gmatch("[^\n]+") do
    local job, idx, state, reason = line:match("^(%d+)_(%d+)|([^|]*)|(.*)$")
    if job and ours[job] then active[tonumber(idx)] = { task = job .. "_" .. idx, state = state, reason = reason } end
  end
  return active
end

-- ended(job ids) -> {["123_4"] = "CANCELLED (exit 0:15)"}: how tasks that left the queue ended,
-- from sacct where accounting is on, else from scontrol (which keeps jobs for MinJobAge).
function M.ended(ids)
  local states = {}
  if #ids == 0 then return states end
  local out = run({ "sacct", "-n", "-P", "-X", "-j", table.concat(ids, ","), "-o", "JobID,State,ExitCode" })
  if out then
    for line in out:gmatch("[^\n]+") do
      local jid, state, code = line:match("^([%d_]+)|([^|]*)|(.*)$")
      if jid then states[jid] = string.format("%s (exit %s)", state, code) end
    end
    return states
  end
  for _, id in ipairs(ids) do
    local sc = run({ "scontrol", "-o", "show", "job", id })
    for line in (sc or ""):gmatch("[^\n]+") do
      local aj, at = line:match("ArrayJobId=(%d+)"), line:match("ArrayTaskId=(%d+)")
      local state, code = line:match("JobState=(%S+)"), line:match("ExitCode=(%S+)")
      if aj and at and state then states[aj .. "_" .. at] = string.format("%s (exit %s)", state, code or "?") end
    end
  end
  return states
end

-- last_task(jobs, index) -> "123_4": the newest Slurm task that ran this problem
local function last_task(jobs, index)
  for k = #jobs, 1, -1 do
    for _, i in ipairs(jobs[k].indices) do if i == index then return jobs[k].id .. "_" .. index end end
  end
end

-- drive(plan, o) -> submissions made. Submits every unfinished problem not already queued, waits,
-- and resubmits a problem whose task left the queue without a finished run, up to o.retries
-- times in this session. o: retries, poll (seconds), on_status(active, info), log(message).
function M.drive(plan, o)
  local tries, given_up = {}, {}
  local resubmitted = 0
  while true do
    local jobs = M.load_jobs(plan)
    local active, qerr = M.queue(plan, jobs)
    if not active then
      -- a controller that does not answer for a moment is no reason to resubmit anything
      o.log("squeue failed (" .. tostring(qerr) .. "); asking again")
    else
      if o.on_status then o.on_status(active, { resubmitted = resubmitted, given_up = given_up }) end
      if next(active) == nil then
        local todo, why_ids = {}, {}
        for _, p in ipairs(plan.problems) do
          if not task_lib.run_state(plan, p).done and not given_up[p.index] then
            todo[#todo + 1] = p
            local t = last_task(jobs, p.index)
            if t and tries[p.index] then why_ids[#why_ids + 1] = t end
          end
        end
        if #todo == 0 then return tries end
        local why = M.ended(why_ids)
        local submit = {}
        for _, p in ipairs(todo) do
          local n = tries[p.index] or 0
          local t = last_task(jobs, p.index)
          if n > (o.retries or 2) then
            given_up[p.index] = true
            o.log(string.format("%s: giving up after %d submissions (last task %s: %s)", p.name, n, tostring(t),
              why[t] or "ended without a finished run"))
          else
            if n > 0 then
              resubmitted = resubmitted + 1
              o.log(string.format("%s: task %s ended without a finished run (%s); resubmitting (%d/%d)", p.name,
                tostring(t), why[t] or "state unknown", n, o.retries or 2))
            end
            submit[#submit + 1] = p.index
          end
        end
        if #submit > 0 then
          local id, err = M.submit(plan, submit)
          if not id then return nil, "sbatch failed: " .. tostring(err) end
          for _, i in ipairs(submit) do tries[i] = (tries[i] or 0) + 1 end
          o.log(string.format("submitted job array %s (%d task(s): %s)", id, #submit, M.ranges(submit)))
        elseif next(given_up) then
          return tries
        end
      end
    end
    require("kagent.task").sleep(o.poll or 30)
  end
end

-- seed(plan, db): a copy of the sweep's database for the tasks to start from, so a task sees the
-- long-term memory (skill records, archive, lessons) a local run would; taken once per sweep.
function M.seed(plan, db)
  local path = dir(plan, "seed.db")
  if fs.exists(path) then return path end
  fs.mkdir_p(dir(plan))
  local ok, err = db:exec("VACUUM INTO ?", { path })
  if not ok then return nil, err end
  return path
end

-- task_main(plan, index) -> exit code: the body of one Slurm task.
function M.task_main(plan, index)
  local p = plan.problems[index]
  if not p then
    io.stderr:write(string.format("sweep task: no problem number %s in %s\n", tostring(index), plan.dir))
    return 2
  end
  local db = M.task_db(plan, p)
  local seed = dir(plan, "seed.db")
  if not fs.exists(db) and fs.exists(seed) then
    local tmp = db .. ".seeding"
    local r = proc.run({ "cp", seed, tmp }, { timeout = 3600 })
    if not (r and r.code == 0) or not os.rename(tmp, db) then
      io.stderr:write("sweep task: cannot copy the database seed " .. seed .. "\n")
      return 3
    end
  end
  local cpu = plan.devices == "cpu"
  local gpus = 0
  if not cpu then
    gpus = #require("kagent.gpu").gpus()
    if gpus == 0 then gpus = plan.slurm.gpus_per_task or 1 end
  end
  local job = os.getenv("SLURM_ARRAY_JOB_ID")
  local rec = task_lib.run(plan, p, { db = db, devices = cpu and "cpu" or nil, gpus = gpus,
    slurm_job = job and (job .. "_" .. tostring(os.getenv("SLURM_ARRAY_TASK_ID"))) or nil })
  if rec.status == "done" or rec.status == "unconfirmed" then return 0 end
  return (rec.exit_code and rec.exit_code ~= 0) and rec.exit_code or 1
end

-- merge(plan, db) -> {name = rows added per table}: each task's database into the sweep's.
-- Merging is idempotent (kagent.mem db:merge), so a sweep resumed after a merge merges again.
function M.merge(plan, db)
  local out = {}
  for _, p in ipairs(plan.problems) do
    local path = M.task_db(plan, p)
    if fs.exists(path) then
      local counts, err = db:merge(path)
      if not counts then return nil, string.format("merging %s: %s", path, tostring(err)) end
      out[p.name] = counts
    end
  end
  return out
end

return M
