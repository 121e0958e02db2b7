-- The search's entry: agents/beam.lua, skill.lua and tune.lua are main() with their default
-- policy. It opens the run (agents/search/startup.lua), loads the policy, starts or resumes the
-- search on the driver (agents/search/driver.lua), finishes it, and maps how it ended to the exit
-- status (docs/agents.md).
local log = require("kagent.log")
local driver = require("agents.search.driver")
local policy_lib = require("agents.search.policy")
local state_file = require("agents.search.state")
local summary = require("agents.search.summary")
local startup = require("agents.search.startup")
local run_lib = require("agents.run")
local exit = require("agents.run.exit")

local M = {}

local function say(prog, msg) io.stderr:write(prog .. ": " .. msg .. "\n") end

-- Exit statuses of the entry points (docs/agents.md): agents/run/exit.lua
M.EXIT, M.replay_status = exit.EXIT, exit.replay_status

-- llm_for(prog, opts) -> the kagent.llm module configured from the options; nil when nothing is
-- configured (the tuner runs instead); or false, exit status when the LLM cannot be used.
-- Only when nothing at all is configured, and no policy was named (--policy), does the tuner run
-- instead; an LLM that was asked for (--model, KAGENT_MODEL, a key or URL) and cannot be used, or
-- a named policy that needs one, is an error that names what to set.
local function llm_for(prog, opts)
  local llm, configured, which, code = run_lib.configure_llm(opts)
  if configured then return llm end
  if require("agents.run.llm_guard").TRANSIENT[code] then
    say(prog, "the LLM does not answer: " .. tostring(which) .. ". Nothing was started.")
    return false, M.EXIT.llm_down
  end
  if which ~= llm.NOT_CONFIGURED or run_lib.model_flags(opts) ~= "" then
    say(prog, run_lib.model_flags(opts) .. tostring(which) .. ". Nothing was started.")
    return false, M.EXIT.input
  end
  if opts._given and opts._given.policy then
    say(prog, string.format("--policy %s needs an LLM: %s. Nothing was started (--policy tune needs none).",
      opts.policy, tostring(which)))
    return false, M.EXIT.input
  end
  io.stderr:write(prog .. ": " .. tostring(which) .. ".\n"
    .. "Falling back to the LLM-free tuner (policy tune): same run directory and memory records.\n")
  return nil
end

-- llm_stop(run) -> exit status 3: the LLM is down. The state saved after the last whole round
-- stays (with the usage and failures since), the run row is `stopped`, and --resume continues.
function M.llm_stop(run)
  local g = run.llm_guard
  local saved = run.rd:read_json("state.json")
  if type(saved) == "table" then
    -- stopped: the run's page says so (until --resume saves the state again)
    saved.usage, saved.llm_failures, saved.stopped = run.usage(), g:summary(), g.down
    run.rd:write("state.json", saved)
    summary.write_report(run, true)
  end
  run.mem:finish("stopped", { stop_reason = "llm_down", error = g.down, llm_failures = g:summary() })
  run.progress:finish()
  return exit.llm_down_status(run.prog, g, string.format("kagent-rt %s --resume %s", run.prog, run.rd.dir))
end

-- write_stop(run) -> exit status 6 where a write of the run folder or the database failed (the
-- first failure, agents/run/writes.lua), else nil. summary.json and the run row then say
-- "failed" with that line, where the disk still takes them.
function M.write_stop(run)
  local line = require("agents.run.writes").failure(run)
  if not line then return nil end
  summary.failed(run, line)
  return exit.write_failed_status(run.prog, run)
end

-- drive(run, pol, saved) -> exit status: start or resume, search, finish
local function drive(run, pol, saved)
  -- a resumed run's state was restored, its kernels read back, before anything was written
  -- (agents/search/startup.lua: a state that lost a kernel is refused there)
  local st = saved and saved.restored
  if saved then driver.supersede(run, st) end
  if not st then
    state_file.save(run, nil)  -- from here a --resume can start the run again
    local why, llm_down
    st, why, llm_down = driver.start(run)
    if M.write_stop(run) then return M.EXIT.write_failed end
    if not st then
      if llm_down then return M.llm_stop(run) end
      say(run.prog, why)
      return M.replay_status(run.prog, summary.failed(run, why), M.EXIT.input)
    end
    state_file.save(run, st)
    summary.write_report(run, true)
  end
  local reason = driver.search(run, pol, st)
  if run.llm_guard.down then return M.llm_stop(run) end
  if M.write_stop(run) then return M.EXIT.write_failed end
  local s = driver.finish(run, st, reason)
  if M.write_stop(run) then return M.EXIT.write_failed end
  -- a search whose finalists all failed the final confirmation has no result to report: 5 where
  -- each was refused for what it did, 7 where one was still "not measured" (ENOISY) at the end
  local code = M.EXIT.done
  if s.status == "unconfirmed" then code = s.not_measured and M.EXIT.not_measured or M.EXIT.unconfirmed end
  return M.replay_status(run.prog, s, code)
end

-- main(prog, argv, default_policy, how) -> exit code; agents/beam.lua, skill.lua and tune.lua are
-- this with their default policy and their own words (how: {about, epilog, llm_free}; the usage
-- line is the same for the three, made here from prog). --policy
-- picks another (a shipped name or a path.lua); --resume continues a run with its own options.
-- Everything on the command line is checked before any work (options, files, policy, LLM,
-- database, devices); a run that fails after its run row exists is marked failed with the reason.
function M.main(prog, argv, default_policy, how)
  how = how or {}
  how.usage = how.usage or ("kagent-rt " .. prog .. " --problem P [--kernel K] [options]")
  how.epilog = "Exit status: 0 done, 1 internal error, 2 bad input, a failed start, a refused --resume (the run "
    .. "in use by another process, or a saved kernel gone: nothing is changed)"
    .. (how.llm_free and "" or " or a refused API key")
    .. (how.llm_free and "" or ", 3 the LLM stopped answering (--resume continues the run), 4 a strict replay "
      .. "(KAGENT_LLM_CACHE=replay) had no recorded answer to some question")
    .. ", 5 no finalist passed the final confirmation (no confirmed kernel, no figure)"
    .. ", 6 a write of the run folder or the memory database failed (a full disk, say)"
    .. ", 7 no finalist confirmed and one was still not measured (the machine too noisy to time it: run again). "
    .. (how.epilog or "")
  local run, saved, plan = startup.open(prog, argv, { how = how, plan = function(opts)
    if opts.tuner then opts.policy = "tune" end
    opts.policy = opts.policy or default_policy
    local pol, perr = policy_lib.load(opts.policy)
    if not pol then say(prog, perr); return nil, M.EXIT.input end
    local llm
    if pol.llm ~= false then
      local lcode
      llm, lcode = llm_for(prog, opts)
      if llm == false then return nil, lcode end
      if not llm then
        opts.policy = "tune"
        pol = assert(policy_lib.load("tune"))
      end
    end
    return { pol = pol, llm = llm, mode = llm and "llm" or "tuner", profile_children = pol.profile_children == true }
  end })
  if not run then return saved end  -- open() said why; this is the exit status
  local pol = plan.pol
  local ok, res = xpcall(drive, debug.traceback, run, pol, saved)
  if ok then return res end
  log.error("%s", tostring(res))
  local first = tostring(res):match("^[^\n]*")
  summary.failed(run, "internal error: " .. first)
  say(prog, "internal error (the run is marked failed; the traceback is in the log): " .. first)
  return M.EXIT.error
end

return M
