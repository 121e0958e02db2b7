-- The search state in its file form, state.json: what --resume needs to continue a run in a new
-- process (the options and policy, the beam, the best, the fingerprints seen, the attempts, the
-- counters, the usage so far). Written by the driver (agents/lib/search.lua) after each round;
-- kernels are saved by path and read back from their files.
local fs = require("kagent.fs")
local json = require("kagent.json")
local attempt = require("agents.lib.attempt")

local M = {}

M.VERSION = 2

local function slim(k)
  return { id = k.id, path = k.path, fingerprint = k.fingerprint, result = k.result, seq = k.seq, round = k.round,
    worker = k.worker, parent = k.parent, attempt_id = k.attempt_id, label = k.label }
end

-- save(run, st): state.json, written atomically
function M.save(run, st)
  local beam = {}
  for i, k in ipairs(st.beam) do beam[i] = slim(k) end
  local o = {}
  for k, v in pairs(run.opts) do if k ~= "_positional" and k ~= "resume_dir" then o[k] = v end end
  run.rd:write("state.json", { version = M.VERSION, round = st.round, opts = o, input = slim(st.input),
    beam = beam, best = slim(st.best), known = st.known, seq = st.seq, baselines = st.baselines,
    mem_run_id = run.mem.run_id, usage = run.usage(), rounds_without_gain = st.rounds_without_gain,
    attempts = st.attempts, stop_reason = st.stop_reason or json.null, sol_checked = st.sol_checked })
end

-- restore(run, saved) -> the search state of a decoded state.json
function M.restore(run, saved)
  local function load(k)
    k.code = fs.read(k.path) or fs.read(run.rd:path(k.path)) or ""
    return attempt.kernel(k)
  end
  local st = { round = saved.round, input = load(saved.input), beam = {}, known = saved.known or {},
    seq = saved.seq or 0, baselines = saved.baselines or {}, attempts = saved.attempts or {},
    rounds_without_gain = saved.rounds_without_gain or 0, sol_checked = saved.sol_checked or {},
    stop_reason = saved.stop_reason ~= json.null and saved.stop_reason or nil }
  for i, k in ipairs(saved.beam) do st.beam[i] = load(k) end
  st.best = load(saved.best)
  for _, k in ipairs(st.beam) do if k.id == st.best.id then st.best = k end end
  return st
end

return M
