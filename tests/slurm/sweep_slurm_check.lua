-- The Slurm half of the sweep test, run by tests/slurm/sweep_slurm_test.sh once its own
-- slurmctld and slurmd are up (SLURM_CONF points at them). A beam sweep of the four small CPU
-- problems against the FAKE LLM server runs locally, then as a job array; in the array, one
-- task is cancelled with scancel and another's kagent-rt is killed with SIGKILL, both in their
-- second round. Checks: both are resubmitted and resume their runs; every row of every task's
-- database is in the merged database exactly once; a second merge adds nothing; each problem's
-- attempts match the local run's.
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs, json, proc, mem = kagent.fs, kagent.json, kagent.proc, kagent.mem
local fake = require("fake_session")
local sweep = require("sweep_session")

local work = assert(os.getenv("KAGENT_SLURM_TEST_DIR"), "run by tests/slurm/sweep_slurm_test.sh")
local TABLES = { "runs", "attempts", "reflexions", "skill_outcomes", "lessons", "archive", "llm_cache" }

local function count(db, sql, params) return db:query(sql, params)[1].n end

local function results_by_name(out)
  local s = json.decode(assert(fs.read(out .. "/sweep.json")))
  local by = {}
  for _, r in ipairs(s.results) do by[r.name] = r end
  return s, by
end

describe("agents/sweep.lua --slurm on a single-node Slurm", function()
  it("merges every task's database once and matches the local sweep, with two tasks killed", function()
    local server, port = fake.start(sweep.script(3), work)
    local env = sweep.env(port, spec.python)
    local t0 = kagent.time.now()

    -- the same sweep on this machine, two problems at a time
    local local_argv = sweep.argv(work .. "/local", work .. "/local.db", nil, { "--max-concurrent", "2" })
    sweep.complete(local_argv, env, work .. "/local", 4)
    local t_local = kagent.time.now() - t0

    -- the job array, two tasks at a time
    local out = work .. "/slurm"
    local slurm_argv = sweep.argv(out, work .. "/slurm.db", nil,
      { "--slurm", "--array-limit", "2", "--cpus-per-task", "1", "--poll", "1", "--retries", "3" })
    local p = sweep.spawn_sweep(slurm_argv, env)
    -- relu_signed: scancel of its Slurm task once its first round is saved
    -- (the launch under way is the record's last: an earlier one may have failed on its own)
    local relu_run = sweep.wait_for(function() return sweep.round_done(out, "relu_signed") end, 300, "relu_signed's round 1")
    local relu_rec = sweep.record(out, "relu_signed")
    local relu_task = relu_rec.launches[#relu_rec.launches].slurm_job
    expect.match(relu_task, "^%d+_2$", "the task is array element 2")
    local sc = proc.run({ "scancel", relu_task })
    expect.eq(sc.code, 0, "scancel " .. relu_task .. ": " .. tostring(sc.stderr))
    -- softmax: SIGKILL of its kagent-rt process once its first round is saved
    local soft_run = sweep.wait_for(function() return sweep.round_done(out, "softmax") end, 300, "softmax's round 1")
    local soft_rec = sweep.record(out, "softmax")
    local soft_pid = soft_rec.launches[#soft_rec.launches].pid
    expect.eq(proc.run({ "kill", "-9", tostring(soft_pid) }).code, 0, "kill -9 " .. tostring(soft_pid))
    local killed_at = { relu_signed = #relu_rec.launches, softmax = #soft_rec.launches }
    local r = sweep.complete(slurm_argv, env, out, 4, p)
    local t_slurm = kagent.time.now() - t0 - t_local
    server:kill()
    for line in r.stderr_all:gmatch("[^\n]+") do
      if line:match("^%[slurm%]") or line:match("slurm: ") then print("     " .. line) end
    end

    -- both were resubmitted and resumed their runs
    expect.match(r.stderr_all, "relu_signed: task " .. relu_task .. " ended without a finished run %(CANCELLED")
    expect.match(r.stderr_all, "softmax: task %d+_4 ended without a finished run")
    for name, run_dir in pairs({ relu_signed = relu_run, softmax = soft_run }) do
      local rec, k = sweep.record(out, name), killed_at[name]
      expect.truthy(#rec.launches > k, name .. " launched again")
      expect.eq(rec.launches[k + 1].resumed, run_dir, name .. ": the launch after the kill resumed its run")
      expect.ne(rec.launches[k + 1].slurm_job, rec.launches[k].slurm_job, name .. " ran in a new task")
      expect.eq(rec.status, "done")
    end
    local s, slurm_res = results_by_name(out)
    local _, local_res = results_by_name(work .. "/local")
    expect.eq(s.aggregate.finished, 4)
    expect.eq(s.aggregate.problems, 4)
    expect.match(r.stdout, "finished 4, failed 0")
    expect.eq(slurm_res.relu_signed.run_dir, relu_run, "relu_signed finished the run it began")
    expect.eq(slurm_res.softmax.run_dir, soft_run, "softmax finished the run it began")

    -- every row of every task's database is in the merged database, exactly once
    local merged = assert(mem.open(work .. "/slurm.db"))
    local totals = {}
    for _, t in ipairs(TABLES) do totals[t] = 0 end
    local n_task_attempts = 0
    local skill_tries, skill_wins = {}, {}
    for _, name in ipairs(sweep.PROBLEMS) do
      local tdb = assert(mem.open(out .. "/tasks/" .. name .. ".db"))
      for _, t in ipairs(TABLES) do totals[t] = totals[t] + count(tdb, "SELECT count(*) AS n FROM " .. t) end
      for _, st in ipairs(tdb:skill_stats{}) do
        skill_tries[st.skill] = (skill_tries[st.skill] or 0) + st.attempts
        skill_wins[st.skill] = (skill_wins[st.skill] or 0) + st.successes
      end
      for _, a in ipairs(tdb:query("SELECT uid, round, worker, role, source_hash, stage, time_ms FROM attempts")) do
        n_task_attempts = n_task_attempts + 1
        local m = merged:query("SELECT round, worker, role, source_hash, stage, time_ms FROM attempts WHERE uid = ?", { a.uid })
        expect.eq(#m, 1, name .. " attempt " .. a.uid .. " in the merged database")
        expect.same({ m[1].round, m[1].worker, m[1].role, m[1].source_hash, m[1].stage, m[1].time_ms },
          { a.round, a.worker, a.role, a.source_hash, a.stage, a.time_ms }, "same attempt")
      end
      for _, k in ipairs(tdb:query("SELECT key, response FROM llm_cache")) do
        expect.eq(merged:cache_get(k.key), k.response, name .. "'s recorded LLM reply merged")
      end
      tdb:close()
      -- merging again adds nothing
      for t, n in pairs(assert(merged:merge(out .. "/tasks/" .. name .. ".db"))) do
        expect.eq(n, 0, name .. ": " .. t .. " after a second merge")
      end
    end
    -- the sweep's database started empty, so it holds the tasks' rows and nothing else
    for _, t in ipairs(TABLES) do
      expect.eq(count(merged, "SELECT count(*) AS n FROM " .. t), totals[t], t .. ": merged = sum over tasks")
    end
    expect.truthy(totals.reflexions > 0 and totals.lessons > 0 and totals.llm_cache > 0 and totals.skill_outcomes > 0
      and totals.archive > 0, "reflexions, lessons, replies, skill outcomes and archived kernels recorded")
    -- the skills' learned record is the sum of the tasks' records
    local merged_stats = merged:skill_stats{}
    expect.truthy(#merged_stats > 0)
    for _, st in ipairs(merged_stats) do
      expect.eq(st.attempts, skill_tries[st.skill], st.skill .. ": attempts in the merged record")
      expect.eq(st.successes, skill_wins[st.skill], st.skill .. ": successes in the merged record")
    end
    expect.eq(count(merged, "SELECT count(*) AS n FROM runs WHERE status = 'done'"), 4)
    expect.eq(#merged:query("SELECT * FROM pragma_foreign_key_check"), 0)

    -- each problem's attempts against the local run: the same kernels in the same rounds; a killed
    -- task also keeps the attempt it recorded in the round it was killed in
    local localdb = assert(mem.open(work .. "/local.db"))
    for _, name in ipairs(sweep.PROBLEMS) do
      local lk = sweep.attempt_keys(localdb, local_res[name].run_uid)
      local sk = sweep.attempt_keys(merged, slurm_res[name].run_uid)
      expect.eq(#lk, 3, name .. ": input and two optimizer attempts locally " .. (#lk ~= 3 and json.encode(localdb:query(
        "SELECT a.round, a.worker, a.role, a.stage, a.error_signature FROM attempts a JOIN runs r ON r.id = a.run_id WHERE r.uid = ?",
        { local_res[name].run_uid })) or ""))
      if name == "relu_signed" or name == "softmax" then
        local left = {}
        for _, k in ipairs(sk) do left[k] = (left[k] or 0) + 1 end
        for _, k in ipairs(lk) do
          expect.truthy((left[k] or 0) > 0, name .. ": local attempt " .. k .. " is in the Slurm run")
          left[k] = (left[k] or 1) - 1
        end
        for k, n in pairs(left) do
          if n > 0 then expect.match(k, "^2/", name .. ": an extra attempt is from the interrupted round 2") end
        end
      else
        expect.same(sk, lk, name .. ": same attempts as the local run")
      end
    end
    localdb:close()
    merged:close()
    print(string.format("     local sweep %.1f s; Slurm sweep %.1f s (%d task attempts merged, %d LLM replies)",
      t_local, t_slurm, n_task_attempts, totals.llm_cache))
  end, { timeout = 900 })
end)
