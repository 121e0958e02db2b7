-- The run: what is fixed for one job of an agent — options, problem, evaluator pool, LLM, memory,
-- run directory, skills — and the helpers roles use (job, evaluate and usage here; the chat in
-- agents/run/chat.lua, prompt blocks in agents/run/prompts.lua; the checks of the command line in
-- agents/run/inputs.lua). setup() returns it read-only: the search state lives in
-- agents/search/driver.lua and only the driver writes it. Roles and policies take the run as an argument, so a test hands them a small
-- fake table with the fields they read.
local fs = require("kagent.fs")
local ktime = require("kagent.time")
local rundir = require("agents.run.rundir")
local memory = require("agents.run.memory")
local progress = require("agents.run.progress")
local calls = require("agents.run.calls")
local llm_guard = require("agents.run.llm_guard")
local reply_stats = require("agents.run.reply_stats")
local inputs = require("agents.run.inputs")
local chat = require("agents.run.chat")
local prompts = require("agents.run.prompts")
local review_inputs = require("agents.run.review_inputs")
local fingerprint = require("agents.lib.fingerprint")
local features = require("agents.lib.features")
local skills_lib = require("agents.lib.skills")

local M = {}

-- The run's API is this one table; its parts live in their own files.
M.die, M.parse, M.check_inputs, M.pool_devices = inputs.die, inputs.parse, inputs.check_inputs, inputs.pool_devices
M.out_dir, M.open_memory = inputs.out_dir, inputs.open_memory
M.model_plan, M.model_flags, M.configure_llm, M.require_llm = chat.model_plan, chat.model_flags, chat.configure_llm,
  chat.require_llm
M.check_llm = chat.check_llm
M.MAX_REPLY_TRACE, M.reply_trace, M.transcript_trace = prompts.MAX_REPLY_TRACE, prompts.reply_trace, prompts.transcript_trace
M.code_from, M.full_prompt, M.entry_point, M.timing_text = prompts.code_from, prompts.full_prompt, prompts.entry_point,
  prompts.timing_text

M.USAGE_FIELDS = { "calls", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost_usd" }

-- The one usage counter is the LLM layer's (kagent.llm.usage()); a resumed run adds what the
-- earlier processes of the run spent (state.json), so totals and budgets survive --resume.
local function usage_fn(llm, base)
  base = base or {}
  return function()
    local live = llm and llm.usage() or {}
    local u = {}
    for _, k in ipairs(M.USAGE_FIELDS) do u[k] = (base[k] or 0) + (live[k] or 0) end
    u.tokens = kagent.llm.total_tokens(u)
    return u
  end
end

-- freeze(t) -> a read-only view of t: reading works, setting a field raises
function M.freeze(t)
  return setmetatable({}, { __index = t, __newindex = function(_, k)
    error("the run is read-only (tried to set '" .. tostring(k) .. "'); search state belongs to agents/search/driver.lua", 2)
  end })
end

-- setup(prog, opts, {mode, llm, state, db, devices}) -> run, or nil, message, exit code.
-- llm: the kagent.llm module when the run may call an LLM (already configured and checked), else
-- nil. db (open_memory's) and devices (pool_devices'): what the caller checked (devices before
-- asking the LLM anything: agents/search/startup.lua), as the inputs (check_inputs). Here the
-- evaluator workers start, and the run row is made last.
-- unknown_tolerance(name, device) -> nil, or why --tolerance `name` is refused: the names are the
-- evaluator's (src/gpu/eval/kagent_eval/judge/compare.py), which its ready line lists as `tolerances`
-- (a device record of pool:devices()); an evaluator that lists none judges the name itself
function M.unknown_tolerance(name, device)
  local names = type(device) == "table" and device.tolerances
  if name == nil or type(names) ~= "table" then return nil end
  for _, n in ipairs(names) do if n == name then return nil end end
  return string.format("--tolerance must be one of %s (the evaluator's names), got '%s'", table.concat(names, ", "),
    tostring(name))
end

function M.setup(prog, opts, how)
  how = how or {}
  local gpu = require("kagent.gpu")
  local t0 = ktime.now()
  local state = how.state
  local problem_code, perr = fs.read(opts.problem)
  if not problem_code then return inputs.unreadable(prog, "problem", opts.problem, perr) end
  local db = how.db
  memory.adopt_legacy_hashes(db, problem_code)

  local wpg = opts.workers_per_gpu
  local pool = gpu.pool({ devices = how.devices, timeout = opts.job_timeout,
    workers_per_gpu = wpg and (wpg == "auto" and wpg or tonumber(wpg)) or nil })
  local devs, perr = pool:devices()
  if not devs then return inputs.die(prog .. ": no evaluator worker started: " .. tostring(perr)) end
  local d1 = devs[1]
  local tol_error = M.unknown_tolerance(opts.tolerance, d1)
  if tol_error then pool:close(); return inputs.die(prog .. ": " .. tol_error) end
  if d1.mode == "cpu" and opts.devices ~= "cpu" then
    io.stderr:write(prog .. ": no GPU found: CPU mode (" .. (opts.language == "cuda"
      and "candidates are C++ through load_inline's cpp_sources; CUDA needs a GPU"
      or "candidates must be pure PyTorch; Triton kernels need a GPU") .. "; no hardware counters).\n")
  end
  if d1.mode ~= "cpu" or d1.workers > 1 then
    io.stderr:write(string.format("%s: %d evaluator worker(s) per %s (%s)\n", prog, d1.workers,
      d1.mode == "cpu" and "device" or "GPU", tostring(d1.workers_how)))
  end
  local device_name = d1.mode == "cpu" and "cpu" or (d1.gpu_name or ("cuda:" .. tostring(d1.device)))
  local gpu_text = d1.mode == "cpu"
    and string.format("CPU mode (torch %s): candidates are pure PyTorch, timed by wall clock; no hardware counters.", tostring(d1.torch))
    or string.format("%s ×%d (torch %s, triton %s)", device_name, #devs, tostring(d1.torch), tostring(d1.triton))

  -- --shrink: the run works on a smaller copy of the problem (agents/run/shrink.lua), its own
  -- problem in memory (its hash is the copy's)
  local shrunk
  if opts.shrink then
    local scode, sres = require("agents.run.shrink").apply(pool, opts.problem, problem_code, opts)
    if not scode then pool:close(); return inputs.die(prog .. ": --shrink: " .. tostring(sres)) end
    problem_code, shrunk = scode, sres
  end
  local info = { problem = opts.problem, problem_hash = fingerprint.hash(problem_code), gpu = device_name,
    policy = opts.policy, config = { rounds = opts.rounds, beam = opts.beam, directions = opts.directions,
      dtype = opts.dtype, model = opts.model, mode = how.mode } }
  local rd, rerr
  if state then rd, rerr = rundir.open(opts.resume_dir) else rd, rerr = rundir.open(opts.out, rundir.new_id(opts.problem)) end
  if not rd then pool:close(); return inputs.die(prog .. ": run directory: " .. tostring(rerr)) end
  local m, merr
  -- one record of failed writes for the folder and the database (agents/run/writes.lua)
  if state then m, merr = memory.resume(db, state.mem_run_id, info, rd.writes) else m, merr = memory.open(db, info, rd.writes) end
  if not m then pool:close(); return inputs.die(prog .. ": memory: " .. tostring(merr)) end

  local problem_path = opts.problem
  if shrunk then
    problem_path = rd:path(require("agents.run.shrink").FILE)
    local ok, werr = rd:write(problem_path, problem_code)
    if not ok then pool:close(); return inputs.die(prog .. ": --shrink: cannot write " .. problem_path .. ": " .. tostring(werr)) end
    io.stderr:write(string.format("%s: --shrink: %s (%s)\n", prog, require("agents.run.shrink").text(shrunk), problem_path))
  end
  -- the op class memory files this run under: from the problem's FX trace (agents/lib/features.lua);
  -- earlier runs' rows of this problem under another class take it
  local op_class = features.problem_op_class(pool, problem_path, problem_code, opts.dtype, opts.job_timeout)
  memory.rekey_op_class(db, info.problem_hash, op_class)
  local r = { prog = prog, opts = opts, mode = how.mode, problem_path = problem_path, problem_code = problem_code,
    shrunk = shrunk,
    dtype = opts.dtype, pool = pool, devices = devs, device_name = device_name, gpu_text = gpu_text,
    -- what a job leaves out gets the evaluator's defaults, which its ready line states
    job_defaults = d1.job_defaults or {},
    can_profile = d1.mode ~= "cpu", db = db, mem = m, rd = rd, t0 = t0, llm = how.llm,
    profile_children = how.profile_children or nil,
    -- "provider:model" as the LLM layer resolved it (an --model without provider included)
    model = how.llm and select(2, how.llm.configured()) or nil,
    model_plan = how.llm and M.model_plan(opts) or nil,
    skills = skills_lib.load(nil, opts.language), op_class = op_class }
  local failed = state and state.llm_failures or {}
  r.llm_guard = llm_guard.new({ limit = opts.llm_failures, backoff = opts.llm_backoff, failures = failed.calls,
    by_code = failed.by_code })
  r.reply_stats = reply_stats.new(state and state.replies)
  r.usage = usage_fn(how.llm, state and state.usage)
  r.progress = progress.new({ rounds = opts.rounds, usage = r.usage })
  M.add_helpers(r)
  if how.llm and (opts.budget_usd or opts.budget_tokens) then
    -- the LLM layer enforces the budget too (a round in flight cannot overspend by much); it
    -- counts this process only, so what earlier processes of a resumed run spent comes off
    local spent = r.usage()
    how.llm.configure({ budget = { max_usd = opts.budget_usd and (opts.budget_usd - spent.cost_usd),
      max_tokens = opts.budget_tokens and (opts.budget_tokens - spent.tokens) } })
  end
  return M.freeze(r)
end

-- add_helpers(r): the functions roles call on a run (kept separate so tests can build a run
-- from a plain table with a fake pool or chat).
function M.add_helpers(r)
  local opts = r.opts
  -- the log of the run's LLM calls (places, replay keys, usage.csv)
  if r.rd and not r.calls then r.calls = calls.new({ rd = r.rd, mem = r.mem, policy = opts.policy }) end

  -- job(code, extra) -> an evaluator job with the run's options (options.lua) and extra fields;
  -- what neither sets keeps the evaluator's default (its ready line's job_defaults: no baselines,
  -- the full metric set)
  function r.job(code, extra)
    local j = { problem = r.problem_path, candidate = code, dtype = r.dtype, timeout = opts.job_timeout,
      tolerance = opts.tolerance, profile = opts.metrics and { metric_set = opts.metrics } or nil,
      generalize = opts.require_generalize or nil, require_generalize = opts.require_generalize or nil,
      sanitize = (opts.sanitize == "all" and r.can_profile) or nil, max_spread = opts.max_spread,
      -- the library policy (--library; each entry point's default: agents/run/language.lua)
      library = opts.library }
    -- the inputs that broke a kernel of this problem are its trials from then on (review_inputs.lua)
    if not (extra and extra.problem) then j.extra_trials = review_inputs.job_trials(r) end
    for k, v in pairs(extra or {}) do j[k] = v end
    return j
  end

  -- evaluate(code) -> result, cached. A source evaluated before in this run (comments and blank
  -- lines aside) is not evaluated again: its verified result comes back with cached = true.
  -- A candidate is verified and timed without its hardware profile (pool:benchmark): most lose
  -- the promotion gate, and nothing reads a loser's counters. The driver profiles the kernels a
  -- policy keeps (agents/search/driver.lua); a policy that reads every child's counters declares
  -- `profile_children = true` (docs/policies.md) and its candidates are fully evaluated.
  -- The cache (r.verified: source fingerprint -> result) is saved in state.json, so a resumed run
  -- does not evaluate again what the interrupted process had (agents/search/state.lua).
  r.verified = {}
  function r.evaluate(code)
    local key = fingerprint.of(code)
    if r.verified[key] then return r.verified[key], true end
    local op = (r.profile_children and r.can_profile) and "evaluate" or "benchmark"
    local res = r.pool[op](r.pool, r.job(code))
    -- --objective in-model: the figure that ranks it is the model's with it inside
    if res.ok and opts.objective == "in-model" then res = require("agents.lib.in_model").rank_by_model(r, code, res) end
    if res.ok then r.verified[key] = res end
    return res, false
  end

  prompts.add(r)
  chat.add(r)
  return r
end

return M
