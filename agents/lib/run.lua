-- The run: what is fixed for one job of an agent — options, problem, evaluator pool, LLM, memory,
-- run directory, skills — and the helpers roles use (chat, job, evaluate, prompt blocks, usage).
-- setup() returns it read-only: the search state lives in agents/lib/search.lua and only the
-- driver writes it. Roles and policies take the run as an argument, so a test hands them a small
-- fake table with the fields they read.
local fs = require("kagent.fs")
local json = require("kagent.json")
local log = require("kagent.log")
local ktime = require("kagent.time")
local prompt = require("kagent.prompt")
local args = require("agents.lib.args")
local options = require("agents.lib.options")
local rundir = require("agents.lib.rundir")
local state_file = require("agents.lib.state")
local memory = require("agents.lib.memory")
local fingerprint = require("agents.lib.fingerprint")
local metrics = require("agents.lib.metrics")
local features = require("agents.lib.features")
local skills_lib = require("agents.lib.skills")
local progress = require("agents.lib.progress")
local calls = require("agents.lib.calls")
local llm_guard = require("agents.lib.llm_guard")
local reply_stats = require("agents.lib.reply_stats")
local models = require("agents.lib.models")

local M = {}

local function die(msg, code)
  io.stderr:write(msg .. "\n")
  return nil, msg, code or 2
end

-- parse(prog, argv[, spec[, how]]) -> opts, or nil, message, exit code (0 after --help or
-- --completion). how: the script's own usage {usage, about, epilog, positional, llm_free}.
function M.parse(prog, argv, spec, how)
  spec = spec or options
  how = how or {}
  how.prog = prog
  local opts, err = args.parse(argv, spec, how)
  if not opts then return die(prog .. ": " .. err .. " (--help lists the options)") end
  if opts.help then print(args.usage(how, spec)); return nil, "help", 0 end
  if opts.completion then
    io.write(args.completion(how, spec, opts.completion))
    return nil, "completion", 0
  end
  if opts.config then
    local merged, why = require("agents.lib.config").merge(opts, spec, how)
    if not merged then return die(prog .. ": " .. why) end
  end
  return opts
end

-- Options a resumed run keeps from its start whatever the command line says: they define the run.
local FIXED_ON_RESUME = { problem = true, kernel = true, dtype = true }

-- read_state(prog, opts) -> the state.json of --resume, or nil when not resuming; nil, msg, code
-- on error. opts then take the run's own options, except those this command line gives.
function M.read_state(prog, opts)
  if not opts.resume then return nil end
  local dir = opts.resume
  if not fs.exists(fs.join(dir, "state.json")) and fs.exists(fs.join(opts.out, opts.resume, "state.json")) then
    dir = fs.join(opts.out, opts.resume)
  end
  local path = fs.join(dir, "state.json")
  local text = fs.read(path)
  if not text then
    return die(prog .. ": --resume " .. opts.resume .. ": no state.json there (is it a run folder, or a run id under --out "
      .. opts.out .. "?)")
  end
  local state, why = state_file.decode(text)
  if not state then return die(prog .. ": --resume: " .. path .. " cannot be read (" .. why .. "); the run cannot be resumed") end
  for k, v in pairs(state.opts) do
    if opts._given[k] and FIXED_ON_RESUME[k] and opts[k] ~= v then
      return die(string.format("%s: --resume: --%s cannot change (the run has %s)", prog, k:gsub("_", "-"), tostring(v)))
    end
    if not opts._given[k] then opts[k] = v end
  end
  opts.resume_dir = dir
  return state
end

-- check_inputs(prog, opts, spec) -> true, or nil, message, exit code: the required options are
-- there and the files they name can be read and look like what they should be, before any work.
function M.check_inputs(prog, opts, spec)
  spec = spec or options
  if not opts.problem then
    return die(prog .. ": --problem is required (a KernelBench problem file; --help lists the options)")
  end
  local code = fs.read(opts.problem)
  if not code then return die(prog .. ": cannot read the problem file " .. opts.problem) end
  for _, need in ipairs({ { "class%s+Model%W", "class Model" }, { "def%s+get_inputs%W", "def get_inputs" },
      { "def%s+get_init_inputs%W", "def get_init_inputs" } }) do
    if not code:find(need[1]) then
      return die(string.format("%s: the problem file %s has no %s (a KernelBench problem defines Model, "
        .. "get_inputs and get_init_inputs)", prog, opts.problem, need[2]))
    end
  end
  if spec.kernel and opts.kernel and not fs.read(opts.kernel) then
    return die(prog .. ": cannot read the kernel file " .. opts.kernel)
  end
  return true
end

-- model_plan(opts) -> which model answers each role (agents/lib/models.lua) | nil, why
function M.model_plan(opts)
  return models.parse(type(opts.model) == "table" and opts.model or (opts.model and { opts.model } or {}))
end

-- model_flags(opts) -> "--model a --model b: " as the user gave them ("" without --model), for
-- messages about them
function M.model_flags(opts)
  local list = type(opts.model) == "table" and opts.model or (opts.model and { opts.model } or {})
  if #list == 0 then return "" end
  return "--model " .. table.concat(list, " --model ") .. ": "
end

-- prices(path) -> the --prices table | nil, why
local function read_prices(path)
  local text = fs.read(path)
  if not text then return nil, "cannot read " .. path end
  local t = json.decode(text)
  if type(t) ~= "table" then return nil, path .. " is not a JSON object" end
  for m, p in pairs(t) do
    if type(p) ~= "table" then return nil, path .. ": the price of " .. tostring(m) .. " is not an object" end
    for k, v in pairs(p) do
      if type(v) ~= "number" or v < 0 then return nil, string.format("%s: %s.%s is not a number >= 0", path, m, k) end
    end
  end
  return t
end

-- configure_llm(opts) -> kagent.llm set up from the options (--model, --prices, --llm-timeout,
-- --stream), then llm.configured()'s answer: true, "provider:model" | false, why, code (ENOTSUP
-- for a --model set or --prices file that cannot be used)
function M.configure_llm(opts)
  local llm = require("kagent.llm")
  local plan, why = M.model_plan(opts)
  if not plan then return llm, false, why, "ENOTSUP" end
  local conf = { model = plan.default, timeout = opts.llm_timeout, stream = opts.stream or nil }
  if opts.prices then
    local p, perr = read_prices(opts.prices)
    if not p then return llm, false, "--prices: " .. perr, "ENOTSUP" end
    conf.prices = p
  end
  if next(conf) then llm.configure(conf) end
  return llm, llm.configured()
end

-- require_llm(prog, opts, needs, hint) -> kagent.llm configured from the options, or nil and the
-- exit status after saying why on stderr: 3 when the LLM does not answer (nothing was started; try
-- later), 2 when none is configured (`needs`: what needs one; `hint`: an extra line, optional)
function M.require_llm(prog, opts, needs, hint)
  local llm, configured, which, code = M.configure_llm(opts)
  if configured then return llm end
  if llm_guard.TRANSIENT[code] then
    io.stderr:write(prog .. ": the LLM does not answer: " .. tostring(which) .. ". Nothing was started.\n")
    return nil, 3
  end
  if which == llm.NOT_CONFIGURED then
    io.stderr:write(prog .. ": " .. needs .. " needs an LLM, and " .. which .. "\n" .. (hint and (hint .. "\n") or ""))
  else
    io.stderr:write(prog .. ": " .. M.model_flags(opts) .. tostring(which)
      .. ". Nothing was started.\n")
  end
  return nil, 2
end

M.USAGE_FIELDS = { "calls", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost_usd" }

-- The one usage counter is the LLM layer's (kagent.llm.usage()); a resumed run adds what the
-- earlier processes of the run spent (state.json), so totals and budgets survive --resume.
local function usage_fn(llm, base)
  base = base or {}
  return function()
    local live = llm and llm.usage() or {}
    local u = {}
    for _, k in ipairs(M.USAGE_FIELDS) do u[k] = (base[k] or 0) + (live[k] or 0) end
    u.tokens = u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_write_tokens
    return u
  end
end

-- freeze(t) -> a read-only view of t: reading works, setting a field raises
function M.freeze(t)
  return setmetatable({}, { __index = t, __newindex = function(_, k)
    error("the run is read-only (tried to set '" .. tostring(k) .. "'); search state belongs to agents/lib/search.lua", 2)
  end })
end

-- The GPUs this process may use, for a message: "... 0 = GPU 4 NVIDIA H100, 1 = GPU 5 ...; CUDA_VISIBLE_DEVICES=4,5"
local function allowed_text(have)
  local mask = os.getenv("CUDA_VISIBLE_DEVICES")
  local from = mask and ("; CUDA_VISIBLE_DEVICES=" .. mask) or ""
  if #have == 0 then
    return (mask and "CUDA_VISIBLE_DEVICES='" .. mask .. "' allows none" or "nvidia-smi lists none") .. "; use --devices cpu"
  end
  local items = {}
  for i, g in ipairs(have) do
    items[i] = string.format("%d = %s %s", i - 1, g.mig and g.uuid or ("GPU " .. g.index), tostring(g.name))
  end
  return "the GPUs this process may use: " .. table.concat(items, ", ") .. from
end

-- pool_devices(prog, opts) -> the pool's devices ("cpu", positions among the GPUs this process may
-- use, or nil: all of them, else CPU mode), or nil, message, exit code when --devices names a GPU
-- that is not there (or asks for all and there is none)
function M.pool_devices(prog, opts)
  if opts.devices == "cpu" or not opts.devices then return opts.devices end
  local have = require("kagent.gpu").gpus()
  local list = {}
  if opts.devices == "all" then
    if #have == 0 then return die(string.format("%s: --devices all: there is no GPU here (%s)", prog, allowed_text(have))) end
    for i = 1, #have do list[i] = i - 1 end
    return list
  end
  for d in opts.devices:gmatch("%d+") do
    d = tonumber(d)
    if d >= #have then
      return die(string.format("%s: --devices %s: there is no GPU %d here (%s)", prog, opts.devices, d, allowed_text(have)))
    end
    list[#list + 1] = d
  end
  return list
end

-- write_probe(db) -> true, or nil and why: one row written and rolled back, so a read-only file
-- (which SQLite opens read-only without a word) is found now, not at the run's first record
local function write_probe(db)
  local ok, res, err = pcall(db.transaction, db, function(d)
    local changes, werr = d:exec("INSERT OR REPLACE INTO llm_cache(key, created) VALUES ('kagent:write-probe', 0)")
    error({ write_error = changes == nil and werr }, 0)  -- never kept: the transaction rolls back
  end)
  if ok then return nil, err end  -- BEGIN failed
  if type(res) == "table" and res.write_error == false then return true end
  return nil, type(res) == "table" and res.write_error or res
end

-- damage(db) -> nil, or what SQLite's own check found wrong with the database's pages. A damaged
-- page fails only the queries that touch it, so a run on it would go on with lessons, attempts
-- or the archive silently missing: it is checked before any work.
local function damage(db)
  local rows, err = db:query("PRAGMA quick_check(3)")
  if not rows then return tostring(err) end
  local found = {}
  for _, r in ipairs(rows) do
    local _, first = next(r)
    local v = r.quick_check or first
    if v ~= "ok" then found[#found + 1] = tostring(v) end
  end
  return #found > 0 and table.concat(found, "; ") or nil
end

-- open_memory(prog, path) -> db that can be written, or nil, message, exit code
local function open_memory(prog, path)
  path = path or require("kagent.mem").default_path()
  local db, err = require("kagent.mem").open(path)
  if db then
    local bad = damage(db)
    if bad then
      db:close()
      return die(string.format("%s: the memory database %s is damaged (%s): restore it from a copy, or move it "
        .. "aside and start a new one (--db or KAGENT_DB)", prog, path, bad))
    end
    local ok, werr = write_probe(db)
    if ok then return db end
    db:close()
    err = werr
  end
  return die(string.format("%s: the memory database %s cannot be written: %s", prog, path, tostring(err)))
end

-- setup(prog, opts, {mode, llm, state}) -> run, or nil, message, exit code.
-- llm: the kagent.llm module when the run may call an LLM (already configured), else nil.
-- The inputs were checked (check_inputs); here the memory database and the devices are checked
-- before the evaluator workers start, and the run row is made last.
function M.setup(prog, opts, how)
  how = how or {}
  local gpu = require("kagent.gpu")
  local t0 = ktime.now()
  local state = how.state
  local problem_code = fs.read(opts.problem)
  if not problem_code then return die(prog .. ": cannot read the problem file " .. opts.problem) end
  local db, dberr, dbcode = open_memory(prog, opts.db)
  if not db then return nil, dberr, dbcode end
  memory.adopt_legacy_hashes(db, problem_code)
  local devices, derr, dcode = M.pool_devices(prog, opts)
  if derr then return nil, derr, dcode end

  local wpg = opts.workers_per_gpu
  local pool = gpu.pool({ devices = devices, timeout = opts.job_timeout,
    workers_per_gpu = wpg and (wpg == "auto" and wpg or tonumber(wpg)) or nil })
  local devs, perr = pool:devices()
  if not devs then return die(prog .. ": no evaluator worker started: " .. tostring(perr)) end
  local d1 = devs[1]
  if d1.mode == "cpu" and opts.devices ~= "cpu" then
    io.stderr:write(prog .. ": no GPU found: CPU mode (candidates must be pure PyTorch; Triton kernels need a GPU; no hardware counters).\n")
  end
  if d1.mode ~= "cpu" or d1.workers > 1 then
    io.stderr:write(string.format("%s: %d evaluator worker(s) per %s (%s)\n", prog, d1.workers,
      d1.mode == "cpu" and "device" or "GPU", tostring(d1.workers_how)))
  end
  local device_name = d1.mode == "cpu" and "cpu" or (d1.gpu_name or ("cuda:" .. tostring(d1.device)))
  local gpu_text = d1.mode == "cpu"
    and string.format("CPU mode (torch %s): candidates are pure PyTorch, timed by wall clock; no hardware counters.", tostring(d1.torch))
    or string.format("%s ×%d (torch %s, triton %s)", device_name, #devs, tostring(d1.torch), tostring(d1.triton))

  local info = { problem = opts.problem, problem_hash = fingerprint.hash(problem_code), gpu = device_name,
    policy = opts.policy, config = { rounds = opts.rounds, beam = opts.beam, directions = opts.directions,
      dtype = opts.dtype, model = opts.model, mode = how.mode } }
  local rd, rerr
  if state then rd, rerr = rundir.open(opts.resume_dir) else rd, rerr = rundir.open(opts.out, rundir.new_id(opts.problem)) end
  if not rd then pool:close(); return die(prog .. ": run directory: " .. tostring(rerr)) end
  local m, merr
  if state then m, merr = memory.resume(db, state.mem_run_id, info) else m, merr = memory.open(db, info) end
  if not m then pool:close(); return die(prog .. ": memory: " .. tostring(merr)) end

  local r = { prog = prog, opts = opts, mode = how.mode, problem_path = opts.problem, problem_code = problem_code,
    dtype = opts.dtype, pool = pool, devices = devs, device_name = device_name, gpu_text = gpu_text,
    can_profile = d1.mode ~= "cpu", db = db, mem = m, rd = rd, t0 = t0, llm = how.llm,
    profile_children = how.profile_children or nil,
    -- "provider:model" as the LLM layer resolved it (an --model without provider included)
    model = how.llm and select(2, how.llm.configured()) or nil,
    model_plan = how.llm and M.model_plan(opts) or nil,
    skills = skills_lib.load(), op_class = features.op_class(problem_code) }
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

  function r.render(name, vars)
    local text, err = prompt.render(name, vars)
    if not text then error(err) end
    return text
  end

  -- job(code, extra) -> an evaluator job with the run's options (options.lua) and extra fields;
  -- what neither sets keeps the evaluator's default (its ready line's job_defaults: no baselines,
  -- the full metric set)
  function r.job(code, extra)
    local j = { problem = r.problem_path, candidate = code, dtype = r.dtype, timeout = opts.job_timeout,
      tolerance = opts.tolerance, profile = opts.metrics and { metric_set = opts.metrics } or nil,
      generalize = opts.require_generalize or nil, require_generalize = opts.require_generalize or nil,
      sanitize = (opts.sanitize == "all" and r.can_profile) or nil }
    for k, v in pairs(extra or {}) do j[k] = v end
    return j
  end

  -- evaluate(code) -> result, cached. A source evaluated before in this run (comments and blank
  -- lines aside) is not evaluated again: its verified result comes back with cached = true.
  -- A candidate is verified and timed without its hardware profile (pool:benchmark): most lose
  -- the promotion gate, and nothing reads a loser's counters. The driver profiles the kernels a
  -- policy keeps (agents/lib/search.lua); a policy that reads every child's counters declares
  -- `profile_children = true` (docs/policies.md) and its candidates are fully evaluated.
  local verified = {}
  function r.evaluate(code)
    local key = fingerprint.of(code)
    if verified[key] then return verified[key], true end
    local op = (r.profile_children and r.can_profile) and "evaluate" or "benchmark"
    local res = r.pool[op](r.pool, r.job(code))
    if res.ok then verified[key] = res end
    return res, false
  end

  -- The system prompt is the same for every call of the run, and so is the skill catalogue in
  -- it: together they pass the providers' minimum cacheable length on their own.
  local system
  function r.system_prompt()
    system = system or r.render("system", { language = r.can_profile and "Triton" or "PyTorch (CPU mode)",
      gpu_name = r.device_name, skills = skills_lib.catalogue(r.skills) })
    return system
  end

  -- problem_block() / parent_block(kernel): the shared context of prompts, rendered once so every
  -- call about a kernel sends byte-identical text first (what a prompt cache needs).
  local blocks = {}
  function r.problem_block()
    blocks.problem = blocks.problem or r.render("problem", { gpu = r.gpu_text or "unknown", dtype = r.dtype,
      problem_code = r.problem_code })
    return blocks.problem
  end
  function r.parent_block(k)
    local key = "kernel:" .. tostring(k.id) .. ":" .. tostring(k.fingerprint)
    if not blocks[key] then
      local res = k.result or {}
      blocks[key] = r.problem_block() .. "\n" .. r.render("parent", { kernel_label = k.label or k.id,
        kernel_code = k.code, timing = M.timing_text(res), roofline = metrics.roofline_text(res),
        metrics = metrics.grouped_text(res) })
    end
    return blocks[key]
  end

  -- The decoding rate the status line shows: the mean over the streams in flight, else the
  -- run's mean (kagent.llm usage), once a reply came streamed.
  local guard = r.llm_guard or llm_guard.new({ limit = opts.llm_failures, backoff = opts.llm_backoff })
  r.llm_guard = guard
  r.reply_stats = r.reply_stats or reply_stats.new()
  local streams, shown_at = {}, 0
  local function rate()
    local sum, n = 0, 0
    for slot in pairs(streams) do
      local tps = slot.p and slot.p.tokens_per_s
      if tps then sum, n = sum + tps, n + 1 end
    end
    if n > 0 then return sum / n end
    return r.llm and r.llm.usage().tokens_per_s
  end
  local function show(force)
    if not r.progress then return end
    local now = ktime.now()
    if not force and now - shown_at < 0.5 then return end
    shown_at = now
    r.progress:update({ tokens_per_s = guard.streamed and rate() or nil, llm_failures = guard.failures,
      replies = r.reply_stats:status() })
  end

  -- chat(text, tag, shared) -> result or nil, "CODE: message", "CODE". `shared` (a block from
  -- above) goes first; for Anthropic it is its own message marked for the prompt cache, for
  -- OpenAI-compatible servers (which cache prefixes by themselves) it is joined with the text
  -- into one message. Failures are retried and counted by the run's guard (agents/lib/llm_guard.lua).
  -- follow: messages after the prompt (the asking loop's continuation or re-ask: the model's
  -- reply, then what is asked of it), optional
  local asked_by_role = {}
  function r.chat(text, tag, shared, follow)
    if not r.llm then return nil, "ENOTSUP: no LLM configured", "ENOTSUP" end
    -- the model of this role (--model ROLE=...), a worker's turn of a mixture, else the run's
    local n = (asked_by_role[tag or "?"] or 0) + 1
    asked_by_role[tag or "?"] = n
    local model = models.pick(r.model_plan, tag, calls.place(), n) or r.model
    local messages
    if shared and tostring(model):match("^anthropic:") then
      messages = { { role = "user", content = shared, cache = true }, { role = "user", content = text } }
    else
      messages = { { role = "user", content = M.full_prompt(text, shared) } }
    end
    local asked = M.full_prompt(text, shared)
    for _, m in ipairs(follow or {}) do
      messages[#messages + 1] = m
      asked = asked .. "\n\n" .. m.role .. ": " .. m.content
    end
    -- the call's place and replay key are taken once: the guard's retries are the same call
    local system_text = r.system_prompt()
    local place, key
    if r.calls then place, key = r.calls:key(tag, system_text, asked) end
    local slot = {}
    streams[slot] = true
    local res, err, code = guard:call(function()
      return r.llm.chat({ model = model, system = system_text, messages = messages,
        max_tokens = opts.max_tokens, temperature = opts.temperature, tag = tag, replay_key = key,
        on_token = function(_, p) slot.p = p; show(false) end })
    end, tag)
    streams[slot] = nil
    if r.calls then r.calls:record(place, key, res, err, code, model) end
    if res then
      if res.text == nil then res.text = "" end
      if res.streamed then guard.streamed = true end
    else
      log.warn("LLM %s call failed: %s", tag or "?", tostring(err))
    end
    show(true)
    return res, err, code
  end

  -- ask{tag, template, vars, shared, parse} -> {value, how, prompt, reply, res, error, llm_code}:
  -- one question to the model, asked until its answer can be used or is lost
  -- (agents/lib/ask.lua); counted per role in r.reply_stats
  -- ask_code{tag, template, vars, shared, base} -> the same with .code (base: the kernel a diff
  -- applies to); ask_json{tag, template, vars, shared, want} (want: the shape, replies.json's)
  function r.ask(q) return require("agents.lib.ask").ask(r, q) end
  function r.ask_code(q) return require("agents.lib.ask").code(r, q) end
  function r.ask_json(q) return require("agents.lib.ask").json(r, q) end

  function r.extract_code(text)
    if not text or not r.llm then return nil end
    return r.llm.extract_code(text, "python")
  end

  -- code_from(text) -> code | nil, "ENOCODE: ...", "ENOCODE" (M.code_from)
  function r.code_from(text) return M.code_from(r.extract_code, text) end

  function r.extract_json(text)
    if not text or not r.llm then return nil end
    return r.llm.extract_json(text)
  end

  r.full_prompt = M.full_prompt
  r.reply_trace = M.reply_trace
  r.entry_point = M.entry_point
  r.timing_text = M.timing_text
  return r
end

-- A reply's copy in the run folder keeps at most this much: the head, then how much was cut
-- (a 10 MB reply of junk is not worth 10 MB in every trace file that shows it).
M.MAX_REPLY_TRACE = 1048576

-- reply_trace(text[, max]) -> what a reply file in the run folder holds (max: the bytes it may
-- keep, default MAX_REPLY_TRACE)
function M.reply_trace(text, max)
  text, max = text or "", max or M.MAX_REPLY_TRACE
  if #text <= max then return text end
  return text:sub(1, max) .. string.format("\n[kagent-rt: the reply was %d bytes; the %d after the "
    .. "first %d are not kept here]\n", #text, #text - max, max)
end

-- transcript_trace(parts) -> a reply file for the replies of one question (its first reply, a
-- continuation, the answer to a re-ask): parts {head, text}, together at most MAX_REPLY_TRACE
-- bytes of what the model sent, each cut reply saying how much was not kept
function M.transcript_trace(parts)
  local out, left = {}, M.MAX_REPLY_TRACE
  for _, p in ipairs(parts) do
    out[#out + 1] = (p.head or "") .. M.reply_trace(p.text, left)
    left = math.max(0, left - #(p.text or ""))
  end
  return table.concat(out)
end

-- code_from(extract, text) -> code | nil, "ENOCODE: ...", "ENOCODE". A reply with no usable code
-- (a refusal, junk, nothing) is a failed reply, not a failed kernel: the caller hands the code
-- on as an LLM failure (agents/lib/attempt.lua), so memory learns nothing from it.
function M.code_from(extract, text)
  local code = text and text ~= "" and extract(text) or nil
  if code and code:match("%S") then return code end
  local shown = text and text:sub(1, 120):gsub("%s+", " ") or ""
  return nil, string.format("ENOCODE: the LLM's reply (%d bytes) has no code block%s", text and #text or 0,
    shown ~= "" and (": " .. shown .. (#text > 120 and " ..." or "")) or ""), "ENOCODE"
end

-- full_prompt(text, shared) -> the text a call sends after the system prompt (what traces keep)
function M.full_prompt(text, shared)
  return shared and (shared .. "\n\n" .. text) or text
end

function M.entry_point(code)
  code = code or ""
  if code:find("def%s+kernel_function") and not code:find("class%s+ModelNew") then return "`def kernel_function(...)`" end
  return "`class ModelNew(nn.Module)`"
end

local function fmt_ms(v) return v and string.format("%.4f ms", v) or "-" end

function M.timing_text(r)
  r = r or {}
  local t = r.time_ms
  local parts = {}
  if type(t) == "table" and t.median then
    parts[#parts + 1] = string.format("median %.4f ms (p10 %s, p90 %s, n=%s)", t.median, fmt_ms(t.p10), fmt_ms(t.p90), tostring(t.n or "?"))
  end
  if r.eager_ms then parts[#parts + 1] = "eager " .. fmt_ms(r.eager_ms) end
  if r.compile_ms then parts[#parts + 1] = "torch.compile " .. fmt_ms(r.compile_ms) end
  return #parts > 0 and table.concat(parts, "; ") or "not timed"
end

return M
