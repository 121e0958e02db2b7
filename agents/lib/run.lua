-- Setup and teardown shared by beam.lua and tune.lua: options, evaluator pool, memory, run
-- directory, the input kernel's evaluation (with eager and torch.compile baselines), state for
-- --resume, and the final re-measure + summary.json.
local fs = require("kagent.fs")
local json = require("kagent.json")
local log = require("kagent.log")
local ktime = require("kagent.time")
local args = require("agents.lib.args")
local options = require("agents.lib.options")
local rundir = require("agents.lib.rundir")
local memory = require("agents.lib.memory")
local fingerprint = require("agents.lib.fingerprint")
local skills_lib = require("agents.lib.skills")
local context = require("agents.lib.context")
local progress = require("agents.lib.progress")
local select = require("agents.lib.select")

local M = {}

local function die(msg, code)
  io.stderr:write(msg .. "\n")
  return nil, msg, code or 2
end

-- parse(prog, argv[, spec]) -> opts, or nil, message, exit code. spec defaults to the options
-- beam.lua and tune.lua share (agents/lib/options.lua).
function M.parse(prog, argv, spec)
  spec = spec or options
  local opts, err = args.parse(argv, spec)
  if not opts then return die(prog .. ": " .. err .. "\n" .. args.usage(prog, spec)) end
  if opts.help then print(args.usage(prog, spec)); return nil, "help", 0 end
  return opts
end

local BASELINES = { "eager", "compile" }

-- setup(prog, opts, mode[, spec]) -> S (ctx with everything), or nil, message, exit code
function M.setup(prog, opts, mode, spec)
  -- required here so the pure helpers of this file load where the GPU/memory modules do not
  local gpu = require("kagent.gpu")
  local mem = require("kagent.mem")
  local t0 = ktime.now()
  local state
  if opts.resume then
    local dir = opts.resume
    if not fs.exists(fs.join(dir, "state.json")) then dir = fs.join(opts.out, opts.resume) end
    local s = fs.read(fs.join(dir, "state.json"))
    if not s then return die(prog .. ": --resume: no state.json in " .. opts.resume) end
    state = json.decode(s)
    for k, v in pairs(state.opts or {}) do
      if k ~= "resume" and k ~= "rounds" and k ~= "_positional" then opts[k] = v end
    end
    opts.resume_dir = dir
  end
  if not opts.problem then return die(prog .. ": --problem is required\n" .. args.usage(prog, spec or options)) end
  local problem_code = fs.read(opts.problem)
  if not problem_code then return die(prog .. ": cannot read problem " .. opts.problem) end

  local devices
  if opts.devices == "cpu" then devices = "cpu"
  elseif opts.devices then
    devices = {}
    for d in opts.devices:gmatch("%d+") do devices[#devices + 1] = tonumber(d) end
  end
  local pool = gpu.pool({ devices = devices, timeout = opts.job_timeout })
  local devs, derr = pool:devices()
  if not devs then return die(prog .. ": no evaluator worker started: " .. tostring(derr), 3) end
  local d1 = devs[1]
  if d1.mode == "cpu" and opts.devices ~= "cpu" then
    io.stderr:write(prog .. ": no GPU found: CPU mode (candidates must be pure PyTorch; Triton kernels need a GPU; no hardware counters).\n")
  end
  local device_name = d1.mode == "cpu" and "cpu" or (d1.gpu_name or ("cuda:" .. tostring(d1.device)))
  local gpu_text = d1.mode == "cpu"
    and string.format("CPU mode (torch %s): candidates are pure PyTorch, timed by wall clock; no hardware counters.", tostring(d1.torch))
    or string.format("%s ×%d (torch %s, triton %s)", device_name, #devs, tostring(d1.torch), tostring(d1.triton))

  local db, dberr = mem.open(opts.db)
  if not db then return die(prog .. ": memory: " .. tostring(dberr)) end
  local info = { problem = opts.problem, problem_hash = fingerprint.hash(problem_code), gpu = device_name,
    policy = (mode == "tuner" and "tune" or opts.policy), config = { rounds = opts.rounds, beam = opts.beam,
      directions = opts.directions, dtype = opts.dtype, model = opts.model, mode = mode } }

  local rd, rerr
  if state then rd, rerr = rundir.open(opts.resume_dir) else rd, rerr = rundir.open(opts.out, rundir.new_id(opts.problem)) end
  if not rd then return die(prog .. ": run directory: " .. tostring(rerr)) end
  local m = state and state.mem_run_id and memory.resume(db, state.mem_run_id, info) or memory.open(db, info)

  local S = context.new({ opts = opts, pool = pool, rd = rd, mem = m, db = db, mode = mode,
    skills = skills_lib.load(), problem_path = opts.problem, problem_code = problem_code,
    device_name = device_name, gpu_text = gpu_text, devices = devs, t0 = t0,
    can_profile = d1.mode ~= "cpu", known = {}, known_src = {}, attempts = {}, seq = 0,
    usage_base = state and state.usage or nil })
  S.progress = progress.new({ rounds = opts.rounds })
  S.state = state
  return S
end

-- input(S) -> kernel record of the run's starting kernel, evaluated with baselines
function M.input(S)
  local opts = S.opts
  if S.state then
    -- resume: kernels come back from their files, results from state.json
    local function load(k)
      k.code = fs.read(k.path) or fs.read(S.rd:path(k.path)) or ""
      return k
    end
    S.input_kernel = load(S.state.input)
    S.beam = {}
    for _, k in ipairs(S.state.beam) do S.beam[#S.beam + 1] = load(k) end
    S.best = load(S.state.best)
    for fp in pairs(S.state.known or {}) do S.known[fp] = true end
    S.seq = S.state.seq or 0
    S.eager_ms, S.compile_ms = S.state.eager_ms, S.state.compile_ms
    S.attempts = S.state.attempts or {}
    M.show_best(S)
    return S.input_kernel
  end
  local code, label = nil, opts.kernel
  if opts.kernel then
    code = fs.read(opts.kernel)
    if not code then return nil, "cannot read kernel " .. opts.kernel end
  else
    local row = S.mem:best_archived(S.dtype)
    if row then code, label = row.source, "archived kernel #" .. tostring(row.id) end
  end
  if not code then
    if not S.llm_enabled then
      return nil, "no --kernel given and no archived kernel for this problem; generating one needs an LLM "
        .. "(set KAGENT_MODEL and its key), or pass --kernel"
    end
    local g, gerr = require("agents.lib.generate").run(S, opts.gen_workers)
    if not g then return nil, gerr end
    code, label = g.code, string.format("generated (worker %d, %d attempt(s))", g.worker, g.attempts)
  end
  S.rd:write("problem.py", S.problem_code)
  S.rd:write("input_kernel.py", code)
  S.progress:update({ round = 0 })
  local r = S.pool:evaluate(S.job(code, { bench = { baselines = BASELINES } }))
  S.rd:write("input_eval.json", r)
  if not r.ok then
    return nil, string.format("the input kernel fails at stage %s: %s", tostring(r.stage), tostring(r.error))
  end
  S.eager_ms, S.compile_ms = r.eager_ms, r.compile_ms
  local k = { id = "input", label = label, code = code, path = S.rd:path("input_kernel.py"), result = r,
    time = r.time_ms, ok = true, seq = 0, round = 0, fingerprint = r.fingerprint or fingerprint.of(code),
    sol_pct = r.roofline and r.roofline.sol_pct }
  k.profile = require("agents.lib.metrics").summarize(r)
  S.known[k.fingerprint] = true
  S.known_src[fingerprint.of(code)] = r
  k.attempt_id = S.mem:add_attempt({ round = 0, role = "input", strategy = S.mode, source_path = k.path,
    source_hash = fingerprint.of(code), fingerprint = k.fingerprint, stage = "done", correct = true,
    time_ms = r.time_ms.median, speedup_vs_eager = r.speedup_vs_eager, speedup_vs_compile = r.speedup_vs_compile,
    metrics = k.profile })
  S.input_kernel, S.beam, S.best = k, { k }, k
  M.show_best(S)
  return k
end

function M.show_best(S)
  local b = S.best
  local ms = b.result.time_ms.median
  S.progress:update({ best_ms = ms, sol_pct = b.sol_pct,
    speedup_eager = S.eager_ms and S.eager_ms / ms, speedup_compile = S.compile_ms and S.compile_ms / ms })
end

local function slim(k)
  return { id = k.id, path = k.path, fingerprint = k.fingerprint, result = k.result, time = k.time, ok = true,
    seq = k.seq, round = k.round, worker = k.worker, parent = k.parent, sol_pct = k.sol_pct,
    attempt_id = k.attempt_id, profile = k.profile, label = k.label }
end

-- save_state(S, round): everything --resume needs, written atomically after each round
function M.save_state(S, round, extra)
  local beam = {}
  for _, k in ipairs(S.beam) do beam[#beam + 1] = slim(k) end
  local o = {}
  for k, v in pairs(S.opts) do if k ~= "_positional" and k ~= "resume_dir" then o[k] = v end end
  local st = { round = round, opts = o, input = slim(S.input_kernel), beam = beam, best = slim(S.best),
    known = S.known, seq = S.seq, eager_ms = S.eager_ms or json.null, compile_ms = S.compile_ms or json.null,
    mem_run_id = S.mem.run_id, usage = { tokens = S.tokens(), cost_usd = S.cost() },
    rounds_without_gain = S.rounds_without_gain or 0, attempts = S.attempts, stop_reason = S.stop_reason }
  for k, v in pairs(extra or {}) do st[k] = v end
  S.rd:write("state.json", st)
end

-- update_best(S, beam) -> true if the best changed by more than noise
function M.update_best(S, beam)
  local top = beam[1]
  if top and top ~= S.best and select.better(top.result.time_ms, S.best.result.time_ms) then
    S.best = top
    M.show_best(S)
    return true
  end
  return false
end

-- finish(S, rounds_done, reason) -> summary table: re-measures the best and the input with
-- both baselines in the same job (same timing method), writes best_kernel.py and summary.json.
function M.finish(S, rounds_done, reason)
  local best = S.best
  S.progress:update({ busy = 0 })
  local final = S.pool:benchmark(S.job(best.code, { bench = { baselines = BASELINES } }))
  if not (final and final.ok) then
    log.warn("final re-measure of the best kernel failed: %s", tostring(final and final.error))
    final = best.result
  end
  S.rd:write("best_kernel.py", best.code)
  S.rd:write("best_eval.json", final)
  local t = final.time_ms or best.result.time_ms
  local eager = final.eager_ms or S.eager_ms
  local comp = final.compile_ms or S.compile_ms
  -- the input is re-timed next to the best so their ratio is not a comparison across jobs
  -- taken at different moments (machine load drifts between them)
  local in_ms = S.input_kernel.result.time_ms.median
  if best ~= S.input_kernel then
    local again = S.pool:benchmark(S.job(S.input_kernel.code))
    if again and again.ok and again.time_ms then in_ms = again.time_ms.median end
  elseif final.time_ms then
    in_ms = final.time_ms.median
  end
  local u = S.usage
  local outcomes = {}
  for _, a in ipairs(S.attempts) do outcomes[a.outcome or "?"] = (outcomes[a.outcome or "?"] or 0) + 1 end
  local beam = {}
  for _, k in ipairs(S.beam) do
    beam[#beam + 1] = { id = k.id, time_ms = k.result.time_ms.median, fingerprint = k.fingerprint, path = k.path }
  end
  local sol = (final.roofline and final.roofline.sol_pct) or best.sol_pct
  local summary = {
    run_id = S.rd.id, mode = S.mode, problem = S.problem_path, input_kernel = S.opts.kernel or S.input_kernel.label,
    dtype = S.dtype, device = S.device_name, model = S.opts.model or os.getenv("KAGENT_MODEL") or json.null,
    policy = S.mode == "tuner" and "tune" or S.strategy and S.strategy.name or S.opts.policy,
    baselines = { eager_ms = eager or json.null, compile_ms = comp or json.null },
    input_ms = in_ms, best_ms = t.median, best_time = t, best = { id = best.id, round = best.round,
      worker = best.worker or json.null, fingerprint = best.fingerprint, path = "best_kernel.py" },
    speedup_vs_input = in_ms / t.median,
    speedup_vs_eager = eager and eager / t.median or json.null,
    speedup_vs_compile = comp and comp / t.median or json.null,
    sol_pct = sol or json.null, verified = final.ok == true,
    rounds = rounds_done, rounds_requested = S.opts.rounds, stop_reason = reason or "rounds done",
    workers_per_round = (S.opts.beam or 2) * (S.opts.directions or 2),
    tokens = { input = u.input_tokens, output = u.output_tokens, cache_read = u.cache_read_tokens,
      cache_write = u.cache_write_tokens, total = S.tokens() },
    llm_calls = u.calls, cost_usd = S.cost(), wall_s = ktime.now() - S.t0,
    attempts = #S.attempts, outcomes = outcomes, beam = beam, memory_run_id = S.mem.run_id,
  }
  S.rd:write("summary.json", summary)
  M.report(S, summary)
  if best ~= S.input_kernel or not S.state then S.mem:archive(best, S.dtype) end
  S.mem:finish("done", summary)
  S.progress:finish(string.format("run %s: best %.4f ms (%.2fx input%s%s) after %d round(s): %s\n  %s",
    S.rd.id, t.median, summary.speedup_vs_input,
    eager and string.format(", %.2fx eager", eager / t.median) or "",
    comp and string.format(", %.2fx torch.compile", comp / t.median) or "", rounds_done, summary.stop_reason, S.rd.dir))
  return summary
end

-- report(S, summary): a small static report.html over the run's attempts
function M.report(S, s)
  local function esc(x) return tostring(x):gsub("&", "&amp;"):gsub("<", "&lt;") end
  local rows = {}
  for _, a in ipairs(S.attempts) do
    rows[#rows + 1] = string.format("<tr><td>%s</td><td>w%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>",
      esc(a.round), esc(a.worker), esc(a.skill or "-"), esc(a.outcome), a.time_ms and string.format("%.4f", a.time_ms) or "-",
      esc(a.error or ""))
  end
  S.rd:write("report.html", table.concat({
    "<!doctype html><meta charset=utf-8><title>kagent-rt run ", esc(s.run_id), "</title>",
    "<h1>", esc(s.problem), "</h1><p>best ", string.format("%.4f", s.best_ms), " ms; input ",
    string.format("%.4f", s.input_ms), " ms; ", esc(s.stop_reason), "</p>",
    "<pre>", esc(json.encode(s, { pretty = true })), "</pre>",
    "<table border=1><tr><th>round</th><th>worker</th><th>skill</th><th>outcome</th><th>ms</th><th>error</th></tr>",
    table.concat(rows), "</table>" }))
end

return M
