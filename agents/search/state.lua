-- The search state in its file form, state.json: what --resume needs to continue a run in a new
-- process (the options and policy, the beam, the best, the fingerprints seen, the sources
-- evaluated and their results, the attempts, the counters, the usage and LLM failures so far).
-- Written by the driver (agents/search/driver.lua) when the run starts (options only: a resume
-- then starts it again), once its input kernel is measured (round 0) and after each round;
-- kernels are saved by path and read back from their files.
local fs = require("kagent.fs")
local json = require("kagent.json")
local ktime = require("kagent.time")
local attempt = require("agents.search.attempt")
local verdict = require("agents.lib.verdict")
local options = require("agents.run.options")
local args = require("agents.run.args")

local M = {}

M.VERSION = 3

-- A kernel's path in state.json is relative to the run folder, so a run resumes from any working
-- folder and after its folder moved (run.rd.dir may itself be relative to the first one).
local function relative(run, path)
  local dir = run.rd.dir:gsub("/+$", "") .. "/"
  if path:sub(1, #dir) == dir then return path:sub(#dir + 1) end
  return path
end

local function slim(run, k)
  return { id = k.id, path = relative(run, k.path), fingerprint = k.fingerprint, result = k.result, seq = k.seq,
    round = k.round, worker = k.worker, parent = k.parent, attempt_id = k.attempt_id, label = k.label,
    granularity = k.granularity }
end

-- the run's options as given or defaulted (the command line's own keys only)
local function run_options(opts)
  local o = {}
  for name in pairs(options) do
    local k = args.key(name)
    if k ~= "resume" then o[k] = opts[k] end
  end
  return o
end

-- encode(run, st) -> the state.json table of a search state (st nil: the run has only started)
function M.encode(run, st)
  local t = { version = M.VERSION, opts = run_options(run.opts), mem_run_id = run.mem.run_id, usage = run.usage(),
    llm_failures = run.llm_guard:summary(), replies = run.reply_stats and run.reply_stats:summary() or nil }
  -- what the live report's header shows before summary.json exists (agents/tools/report/run_data.lua):
  -- the status line's model, device and mode, and the wall time at this save
  t.live = { model = run.model, device = run.device_name, mode = run.mode,
    wall_s = run.t0 and (ktime.now() - run.t0) or nil }
  if not st then return t end
  local beam = {}
  for i, k in ipairs(st.beam) do beam[i] = slim(run, k) end
  t.round, t.input, t.beam, t.best, t.known, t.seq = st.round, slim(run, st.input), beam, slim(run, st.best), st.known,
    st.seq
  t.baselines, t.rounds_without_gain, t.attempts = st.baselines, st.rounds_without_gain, st.attempts
  t.stop_reason, t.sol_checked = st.stop_reason or json.null, st.sol_checked
  t.timing = st.timing
  -- the sources evaluated so far and their results (run.evaluate's cache): a resumed round
  -- finds a source the interrupted process evaluated as a duplicate, as the first process would
  if next(run.verified or {}) then t.verified = run.verified end
  return t
end

-- save(run, st): state.json, written atomically
function M.save(run, st)
  return run.rd:write("state.json", M.encode(run, st))
end

local function kernel_ok(k)
  return type(k) == "table" and type(k.path) == "string" and verdict.verified(k.result)
end

-- decode(text) -> the state of a state.json (nulls removed), or nil and why it cannot be used
function M.decode(text)
  local t, err = json.decode(text)
  if not t then return nil, tostring(err) end
  if type(t) ~= "table" or json.is_array(t) then return nil, "not a JSON object" end
  json.strip_nulls(t)
  if type(t.version) ~= "number" or t.version > M.VERSION then
    return nil, "state version " .. tostring(t.version) .. " (this kagent-rt reads up to " .. M.VERSION .. ")"
  end
  if type(t.opts) ~= "table" then return nil, "no options" end
  if type(t.mem_run_id) ~= "number" then return nil, "no memory run id" end
  if t.input ~= nil then
    if type(t.round) ~= "number" or not kernel_ok(t.input) or not kernel_ok(t.best) or type(t.beam) ~= "table" then
      return nil, "the search state is incomplete"
    end
    for _, k in ipairs(t.beam) do if not kernel_ok(k) then return nil, "a kernel of the beam is incomplete" end end
  end
  return t
end

-- kernel_path(dir, path) -> where a saved kernel is now: relative to the run folder dir; a state
-- written before paths were (relative to the first working folder, "runs/<id>/rounds/...") is
-- found by the part after the run folder's name, wherever the folder is now
local function kernel_path(dir, path)
  if path:sub(1, 1) == "/" then return path end
  local mine = fs.join(dir, path)
  if fs.exists(mine) then return mine end
  local name = fs.basename(dir:gsub("/+$", ""))
  local after = path:match("^.-/" .. name:gsub("%p", "%%%0") .. "/(.+)$")
  return after and fs.join(dir, after) or mine
end

-- restore(dir, saved) -> the search state of a decoded state.json of the run folder dir; nil
-- when the run had only started (no input kernel measured yet: the driver starts it again);
-- nil, why when a kernel it names cannot be read (a kernel is never taken as empty). Only reads:
-- --resume calls it before anything is written (agents/search/startup.lua).
function M.restore(dir, saved)
  if not saved.input then return nil end
  local missing
  local function load(k)
    local path = kernel_path(dir, k.path)
    k.code = fs.read(path)
    if not k.code or k.code == "" then
      missing = missing or string.format("kernel %s of the saved state cannot be read at %s", tostring(k.id), path)
      k.code = ""
    end
    k.path = path
    return attempt.kernel(k)
  end
  local st = { round = saved.round, input = load(saved.input), beam = {}, known = saved.known or {},
    seq = saved.seq or 0, baselines = saved.baselines or {}, attempts = saved.attempts or {},
    rounds_without_gain = saved.rounds_without_gain or 0, sol_checked = saved.sol_checked or {},
    timing = type(saved.timing) == "table" and saved.timing or { search_s = 0 },
    stop_reason = saved.stop_reason,
    verified = type(saved.verified) == "table" and not json.is_array(saved.verified) and saved.verified or {} }
  for i, k in ipairs(saved.beam) do st.beam[i] = load(k) end
  st.best = load(saved.best)
  if missing then return nil, missing end
  for _, k in ipairs(st.beam) do if k.id == st.best.id then st.best = k end end
  return st
end

return M
