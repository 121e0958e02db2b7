-- The start-up of every entry script that makes a run (agents/beam.lua, skill.lua and tune.lua
-- through agents/search/main.lua; agents/generate.lua; agents/fuse.lua): options, the state of
-- --resume, the input files, the devices, the script's own choice of LLM and mode, the LLM's
-- check (one request: the key taken, the models served), the memory database, then the run
-- (agents/run/init.lua, setup). Everything on the command line is checked before any work, and
-- the options before any network.
local fs = require("kagent.fs")
local run_lib = require("agents.run")
local state_file = require("agents.search.state")
local rundir = require("agents.run.rundir")

local M = {}

-- Options a resumed run keeps from its start whatever the command line says: they define the run.
local FIXED_ON_RESUME = { problem = true, kernel = true, dtype = true, shrink = true }

-- read_state(prog, opts) -> the state.json of --resume, or nil when not resuming; nil, msg, code
-- on error. opts then take the run's own options, except those this command line gives.
-- Every refusal comes before anything is written to the run folder or the database (docs/agents.md,
-- "--resume"): the folder is locked first (a run another process works on is refused with its pid),
-- then its state is read under the lock and every kernel it names is read back (state.restored:
-- the search state, nil when the run had only started).
function M.read_state(prog, opts)
  if not opts.resume then return nil end
  local dir = opts.resume
  if not fs.exists(fs.join(dir, "state.json")) and fs.exists(fs.join(opts.out, opts.resume, "state.json")) then
    dir = fs.join(opts.out, opts.resume)
  end
  local path = fs.join(dir, "state.json")
  if not fs.exists(path) then
    return run_lib.die(prog .. ": --resume " .. opts.resume .. ": no state.json there (is it a run folder, or a run id under --out "
      .. opts.out .. "?)")
  end
  local locked, lerr, lcode, holder = rundir.lock(dir)
  if not locked then
    if lcode == "EBUSY" then
      return run_lib.die(string.format("%s: --resume %s: the run is in use by %s (it holds %s); wait for it to end, "
        .. "or stop it, then resume. Nothing was changed.", prog, dir, holder and ("process " .. holder) or "another process",
        fs.join(dir, rundir.LOCK)))
    end
    return run_lib.die(prog .. ": --resume " .. dir .. ": cannot lock the run folder: " .. tostring(lerr))
  end
  local text = fs.read(path)
  if not text then return run_lib.die(prog .. ": --resume: cannot read " .. path) end
  local state, why = state_file.decode(text)
  if not state then return run_lib.die(prog .. ": --resume: " .. path .. " cannot be read (" .. why .. "); the run cannot be resumed") end
  for k, v in pairs(state.opts) do
    if opts._given[k] and FIXED_ON_RESUME[k] and opts[k] ~= v then
      return run_lib.die(string.format("%s: --resume: --%s cannot change (the run has %s)", prog, k:gsub("_", "-"), tostring(v)))
    end
  end
  -- nothing is run on a state that lost a kernel: an empty one would be optimized instead
  local restored, lost = state_file.restore(dir, state)
  if lost then return run_lib.die(prog .. ": cannot resume " .. dir .. ": " .. lost .. ". Nothing was changed.") end
  for k, v in pairs(state.opts) do
    if not opts._given[k] then opts[k] = v end
  end
  state.restored = restored
  opts.resume_dir = dir
  return state
end

-- open(prog, argv, o) -> run, saved state (nil unless --resume), plan | nil, exit code.
-- o: {spec (nil: the search's options), how (the script's usage: args.lua), plan = fn(opts) ->
-- {llm, mode, profile_children, ...} | nil, exit code: what the script decides once the inputs
-- are known (which LLM, which policy)}. The plan comes back as it is, for the script.
function M.open(prog, argv, o)
  local opts, _, code = run_lib.parse(prog, argv, o.spec, o.how)
  if not opts then return nil, code end
  local saved, _, scode = M.read_state(prog, opts)
  if opts.resume and not saved then return nil, scode end
  -- the entry point's own --library default where neither the command line nor the resumed run set one
  require("agents.run.language").settle(prog, opts)
  local checked, _, icode = run_lib.check_inputs(prog, opts, o.spec)
  if not checked then return nil, icode end
  local objective_ok, why = require("agents.lib.in_model").check_options(opts)
  if not objective_ok then
    local _, _, ocode = run_lib.die(prog .. ": " .. why)
    return nil, ocode
  end
  -- the devices are this machine's to tell, before the network: a wrong option is said as such,
  -- not hidden behind an LLM that does not answer
  local devices, derr, dcode = run_lib.pool_devices(prog, opts)
  if derr then return nil, dcode end
  local plan, pcode = o.plan(opts)
  if not plan then return nil, pcode end
  -- the LLM asked once, before any worker starts: the key taken, the models served; then the
  -- memory database (made where missing, so only once nothing else refused the run)
  if plan.llm then
    local llm_ok, lcode = run_lib.check_llm(prog, opts, plan.llm)
    if not llm_ok then return nil, lcode end
  end
  local db, _, dbcode = run_lib.open_memory(prog, opts.db)
  if not db then return nil, dbcode end
  local run, _, ecode = run_lib.setup(prog, opts, { mode = plan.mode, llm = plan.llm, state = saved,
    profile_children = plan.profile_children, db = db, devices = devices })
  if not run then return nil, ecode end
  return run, saved, plan
end

return M
