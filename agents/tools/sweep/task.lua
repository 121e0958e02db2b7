-- One problem of a sweep: find where its run stands (finished, interrupted, not started), start
-- or resume it as a child kagent-rt process, and keep a record of every launch in
-- tasks/<name>.json. The same code runs a problem locally and inside a Slurm task.
local fs = require("kagent.fs")
local json = require("kagent.json")
local proc = require("kagent.proc")
local task = require("kagent.task")
local ktime = require("kagent.time")
local plan_lib = require("agents.tools.sweep.plan")

local M = {}

M.HEARTBEAT_S = tonumber(os.getenv("KAGENT_SWEEP_HEARTBEAT") or "") or 15

-- binary() -> the path of this kagent-rt binary, which runs each problem (KAGENT_BIN overrides).
function M.binary()
  local env = os.getenv("KAGENT_BIN")
  if env and env ~= "" then return fs.abspath(env) end
  return kagent.exe
end

-- run_state(plan, p) -> {done = run folder} | {resume = run folder} | {}: the newest run with a
-- summary.json of a finished run is done; else the newest with a state.json (written from its
-- start) is resumed; a run whose start failed (summary.json with status "failed") is left as it
-- is and the problem started again.
function M.run_state(plan, p)
  local dir = plan_lib.runs_dir(plan, p)
  local names = fs.list(dir) or {}
  local resume
  for i = #names, 1, -1 do
    local d = fs.join(dir, names[i])
    local s = fs.read(fs.join(d, "summary.json"))
    if s then
      local summary = json.decode(s)
      if not (type(summary) == "table" and summary.status == "failed") then return { done = d } end
    elseif not resume and fs.exists(fs.join(d, "state.json")) then
      resume = d
    end
  end
  return { resume = resume }
end

function M.read_record(plan, p)
  local s = fs.read(plan_lib.task_path(plan, p))
  local r = s and json.decode(s)
  return type(r) == "table" and r or nil
end

local function write_record(plan, p, rec)
  rec.updated = ktime.wall()
  fs.write(plan_lib.task_path(plan, p), json.encode(rec, { pretty = true }) .. "\n")
end

-- The last lines of the log that are not progress lines: what a failed run said last.
function M.log_tail(path, n)
  local text = fs.read(path) or ""
  local lines = {}
  for line in text:gmatch("[^\n]+") do
    if not line:match("^%[round ") and not line:match("^%[generate%]") then lines[#lines + 1] = line end
  end
  local out = {}
  for i = math.max(1, #lines - (n or 6) + 1), #lines do out[#out + 1] = lines[i] end
  return table.concat(out, "\n")
end

local function hostname()
  local h = fs.read("/proc/sys/kernel/hostname")
  return h and h:gsub("%s+$", "") or "?"
end

-- stop_stale(plan, p, rec): a launch that is still running here although no driver runs it (its
-- driver was killed with SIGKILL, which leaves runs behind) is stopped before the problem starts
-- again, so two runs never write one run folder. The process is recognised by its command line.
local function stop_stale(plan, p, rec)
  local last = rec.launches[#rec.launches]
  if not (last and last.pid and last.finished == nil and last.host == hostname()) then return end
  local cmd = fs.read("/proc/" .. tostring(last.pid) .. "/cmdline") or ""
  if not cmd:find(plan_lib.runs_dir(plan, p), 1, true) then return end
  for _, sig in ipairs({ "TERM", "KILL" }) do
    proc.run({ "kill", "-" .. sig, tostring(last.pid) }, { timeout = 10 })
    for _ = 1, 100 do
      if not fs.exists("/proc/" .. tostring(last.pid)) then return end
      task.sleep(0.1)
    end
  end
end

-- run(plan, p, o) -> record. o: db (KAGENT_DB for the run), devices ("0,1" | "cpu" | nil: what
-- the run finds), gpus (GPUs held, for GPU-hours), slurm_job (id of the Slurm task), env (more
-- variables for the child), time_limit (seconds, or nil: the run is stopped past it, TERM then
-- KILL, and the record says so). The record is written at the start, on each heartbeat and at
-- the end.
function M.run(plan, p, o)
  local rec = M.read_record(plan, p) or { name = p.name, problem = p.problem, launches = {} }
  local st = M.run_state(plan, p)
  if st.done then
    rec.status, rec.run_dir = "done", st.done
    write_record(plan, p, rec)
    return rec
  end
  stop_stale(plan, p, rec)
  local launch = { started = ktime.wall(), host = hostname(), resumed = st.resume or json.null,
    gpus = o.gpus or 0, slurm_job = o.slurm_job or json.null, devices = o.devices or json.null }
  rec.launches[#rec.launches + 1] = launch
  rec.status, rec.error, rec.exit_code = "running", nil, nil
  write_record(plan, p, rec)

  local log = plan_lib.log_path(plan, p)
  fs.mkdir_p(fs.dirname(log))
  -- a launch killed mid-line leaves no newline; the marker starts a line of its own anyway
  local before = fs.read(log)
  fs.append(log, string.format("%s== %s launch %d on %s%s\n", (before and before ~= "" and before:sub(-1) ~= "\n") and "\n" or "",
    os.date("!%Y-%m-%dT%H:%M:%SZ"), #rec.launches, launch.host, st.resume and (", resuming " .. st.resume) or ""))
  local argv = { "sh", "-c", 'exec "$0" "$@" >>"$KAGENT_SWEEP_LOG" 2>&1', M.binary() or "kagent-rt" }
  for _, a in ipairs(plan_lib.command(plan, p, { resume = st.resume, devices = o.devices })) do argv[#argv + 1] = a end
  local env = { KAGENT_DB = o.db, KAGENT_PROGRESS = "lines", KAGENT_SWEEP_LOG = log }
  for k, v in pairs(o.env or {}) do env[k] = v end
  local child, err = proc.spawn(argv, { env = env, kill_grace = 10 })
  local res
  if child then
    -- the shell execs kagent-rt, so this is the run's own process
    launch.pid = child.pid
    write_record(plan, p, rec)
    local beat = task.spawn(function()
      while true do
        task.sleep(M.HEARTBEAT_S)
        launch.alive = ktime.wall()
        write_record(plan, p, rec)
      end
    end)
    res = child:wait(o.time_limit)
    task.kill(beat)
  else
    res = { code = 127, stderr = tostring(err) }
  end
  launch.finished, launch.code, launch.signal = ktime.wall(), res.code, res.signal or json.null
  if res.timed_out then launch.timed_out = true end

  local after = M.run_state(plan, p)
  rec.run_dir = after.done or after.resume or json.null
  rec.exit_code = res.code
  if res.code == 0 and after.done then
    rec.status = "done"
    rec.run_uid = M.run_uid(o.db, after.done)
  elseif res.code == require("agents.search.main").EXIT.unconfirmed and after.done then
    -- finished, with no finalist confirmed: a result of its own (no figure), not a failure to retry
    rec.status = "unconfirmed"
    rec.run_uid = M.run_uid(o.db, after.done)
  elseif res.timed_out then
    rec.status = "failed"
    -- one line, its head before the first colon (the sweep's table of failed runs splits it there)
    rec.error = string.format("time limit: the run passed the sweep's --time (%d s) and was stopped; running "
      .. "the sweep again starts it again (resumes it, where the run saved its state)", o.time_limit)
  else
    rec.status = "failed"
    rec.error = (res.signal and ("killed by signal " .. res.signal) or ("exit " .. tostring(res.code)))
      .. ": " .. (child and M.log_tail(log) or tostring(err))
  end
  write_record(plan, p, rec)
  return rec
end

-- run_uid(db_path, run_dir) -> the uid of the run's row in memory: integer ids are local to one
-- database, the uid finds the run again after a Slurm task's database is merged.
function M.run_uid(db_path, run_dir)
  local s = fs.read(fs.join(run_dir, "summary.json"))
  local summary = s and json.decode(s)
  if not (type(summary) == "table" and type(summary.memory_run_id) == "number") then return json.null end
  local db = require("kagent.mem").open(db_path)
  if not db then return json.null end
  local rows = db:query("SELECT uid FROM runs WHERE id = ?", { summary.memory_run_id })
  db:close()
  return rows and rows[1] and rows[1].uid or json.null
end

return M
