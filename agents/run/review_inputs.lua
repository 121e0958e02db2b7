-- The inputs that broke a kernel of a problem, its trials from then on (--review, docs/agents.md
-- "The reviewer"): kept per problem and dtype in the memory database (table measurements, kind
-- "review_inputs") and the run folder (review/inputs.json), and sent as the job option
-- extra_trials (docs/lua-api.md) in every job of the problem, whatever --review says. Also the
-- run's review state, which agents/search/review.lua (the reviews themselves) fills.
local json = require("kagent.json")
local fingerprint = require("agents.lib.fingerprint")

local M = {}

-- the review state of a run (the run table is read-only; this is the reviewer's own), keyed by
-- its folder: the run's helpers (run.job) see the table a run is built from, the roles its
-- read-only view (agents/run/init.lua freeze), and both share the folder
local states = setmetatable({}, { __mode = "k" })
function M.state(run)
  local key = run.rd or run
  local s = states[key]
  if not s then
    s = { verdicts = {}, reviews = {}, proposals = 0, refused_proposals = 0, added = 0, inputs = {} }
    states[key] = s
  end
  return s
end

local state = M.state

local function inputs_key(run)
  return fingerprint.hash(json.encode({ problem = fingerprint.hash(run.problem_code or ""), dtype = run.dtype },
    { sort_keys = true }))
end

-- inputs(run) -> the problem's stored inputs (proposals that broke a kernel), oldest first; per
-- problem, as a session of agents/fuse.lua (agents/flows/subrun.lua) may share its run's folder
function M.inputs(run)
  local s, key = state(run), inputs_key(run)
  if not s.inputs[key] then
    local v = run.db and run.db.measurement_get and run.db:measurement_get("review_inputs", key)
    s.inputs[key] = type(v) == "table" and type(v.inputs) == "table" and v.inputs or {}
  end
  return s.inputs[key]
end

-- job_trials(run) -> the extra_trials every job of the run carries: the stored inputs, or nil
function M.job_trials(run)
  local list = M.inputs(run)
  return #list > 0 and list or nil
end

-- store(run, p): an input that broke a kernel joins the problem's trials, under an id made from
-- what it describes (the same input twice is stored once)
function M.store(run, p)
  local id = "input-" .. fingerprint.hash(json.encode(p.calls, { sort_keys = true })):sub(1, 10)
  local list = M.inputs(run)
  for _, q in ipairs(list) do if q.id == id then return id end end
  list[#list + 1] = { id = id, why = p.why, calls = p.calls }
  state(run).added = state(run).added + 1
  if run.db and run.db.measurement_put then
    local ok, err = run.db:measurement_put("review_inputs", inputs_key(run), { inputs = list })
    if not ok and run.mem and run.mem.failed then run.mem:failed(err) end  -- stops the run (agents/run/writes.lua)
  end
  run.rd:write("review/inputs.json", { inputs = list })
  return id
end

function M.stored_ids(run)
  local ids = {}
  for _, q in ipairs(M.inputs(run)) do ids[q.id] = true end
  return ids
end

return M
