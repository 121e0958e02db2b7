-- agents/compare.lua: two or more policies over one set of problems, with the LLM held fixed.
--   kagent-rt agents/compare.lua --policies beam,greedy --problems DIR|LIST [--kernels DIR]
--       (--replay CACHE.db | --live [--seed N]) [--model provider:model] [--out DIR]
--       [run options: --rounds 4 --dtype bf16 ...] [-- more arguments for each run]
-- Each policy runs as a sweep (agents/sweep.lua) in OUT/<policy>/ with a database of its own, so
-- no policy learns from another's runs. --replay answers every LLM call from a recorded cache
-- and sends nothing to the network: a question the cache has no answer for is recorded
-- (replay_misses.json in its run) and stops that branch. --live calls the model with a fixed
-- seed (temperature 0 unless given) and records every reply into OUT/llm_cache.db, so the same
-- comparison can be replayed. Prints a table; writes OUT/compare.json, compare.md and index.html.
local fs = require("kagent.fs")
local json = require("kagent.json")
local proc = require("kagent.proc")
local run_lib = require("agents.run")
local run_args = require("agents.tools.sweep.run_args")
local plan_lib = require("agents.tools.sweep.plan")
local results = require("agents.tools.compare.results")

local PROG = "agents/compare.lua"

local SPEC = {
  policies = { type = "string", help = "two or more policies, comma-joined: beam, greedy, skill, tune, fuse or policy files" },
  problems = { type = "string", help = "a folder of problems, a list file, or .py paths (as agents/sweep.lua --problems)" },
  kernels = { type = "string", help = "folder of first kernels named <problem>.py" },
  replay = { type = "string", help = "LLM record/replay database to answer every call from (no network)" },
  live = { type = "boolean", default = false, help = "call the LLM (fixed seed and model) and record its replies into OUT/llm_cache.db" },
  seed = { type = "integer", default = 0, help = "--live: the runs' random seed (KAGENT_SEED)" },
  out = { type = "string", help = "the comparison folder (default runs/compare_<UTC time>); an existing one is resumed" },
  devices = { type = "string", help = "GPU indices \"0,1\" or \"cpu\" (as agents/sweep.lua)" },
  ["max-concurrent"] = { type = "integer", min = 1, help = "problems run at once per policy (as agents/sweep.lua)" },
}
local HOW = { usage = "kagent-rt agents/compare.lua --policies A,B --problems DIR|LIST (--replay CACHE.db | --live) "
    .. "[options] [-- more arguments for each run]",
  about = "Two or more policies over one set of problems with the LLM held fixed: answered from a recorded cache "
    .. "(nothing sent; a question it has no answer for stops its branch) or live with a fixed seed and model, "
    .. "recorded. Each policy runs as a sweep with its own database.",
  epilog = "-- ARGS...: passed as they are to every run. Exit status: 0 done, 1 a policy's sweep did not finish, "
    .. "2 bad input, 4 a strict replay had no recorded answer to some question. Figures and their definitions: "
    .. "docs/sweeps.md; replay and comparison: docs/reports.md" }
-- The runs' own options, passed to every run of every policy.
local PASS = run_args.add(SPEC)

local function fail(msg, code)
  io.stderr:write(PROG .. ": " .. msg .. "\n")
  return code or 2
end

local function split(s)
  local out = {}
  for v in tostring(s):gmatch("[^,]+") do out[#out + 1] = v end
  return out
end

-- folder_name(policy) -> the policy's sweep folder name (a policy file by its stem)
local function folder_name(p) return (fs.basename(p):gsub("%.lua$", "")) end

local function binary()
  return require("agents.tools.sweep.task").binary() or "kagent-rt"
end

-- sweep(policy, o) -> exit code of agents/sweep.lua for one policy, its output shown as it goes
local function sweep(policy, o)
  local argv = { binary(), "--env-file", "/dev/null", kagent.resolve("agents/sweep.lua"), "--problems", o.problems,
    "--policy", policy, "--out", fs.join(o.out, folder_name(policy)), "--db", fs.join(o.out, folder_name(policy), "kagent.db") }
  if o.kernels then argv[#argv + 1] = "--kernels"; argv[#argv + 1] = o.kernels end
  if o.devices then argv[#argv + 1] = "--devices"; argv[#argv + 1] = o.devices end
  if o.max_concurrent then argv[#argv + 1] = "--max-concurrent"; argv[#argv + 1] = tostring(o.max_concurrent) end
  for _, a in ipairs(o.run_args) do argv[#argv + 1] = a end
  -- stdout and stderr joined, passed on line by line as the sweep prints them
  local cmd = { "sh", "-c", 'exec "$0" "$@" 2>&1' }
  for _, a in ipairs(argv) do cmd[#cmd + 1] = a end
  local p, err = proc.spawn(cmd, { env = o.env })
  if not p then return nil, err end
  while true do
    local line, cut = p:read_line(3600)  -- a line over proc's max_line comes as its head
    if not line then break end
    io.stderr:write("  " .. line .. (cut == true and " [cut]" or "") .. "\n")
  end
  return p:wait().code
end

local function main(argv)
  local own, extra, after = {}, {}, false
  for _, a in ipairs(argv) do
    if after then extra[#extra + 1] = a elseif a == "--" then after = true else own[#own + 1] = a end
  end
  local opts, _, pcode = run_lib.parse(PROG, own, SPEC, HOW)
  if not opts then return pcode end
  local policies = split(opts.policies or "")
  if #policies < 2 then return fail("--policies needs two or more policies, comma-joined") end
  local seen = {}
  for _, p in ipairs(policies) do
    if seen[folder_name(p)] then return fail("two policies are named " .. folder_name(p)) end
    seen[folder_name(p)] = true
    if not plan_lib.entry(p) then return fail("unknown policy " .. p) end
  end
  if not opts.problems then return fail("--problems is required") end
  local problems, perr = plan_lib.problem_paths(opts.problems)
  if not problems then return fail(perr) end
  if opts.replay ~= nil and opts.live then return fail("--replay and --live: give one, not both") end
  if not (opts.replay or opts.live) then return fail("say where the LLM's answers come from: --replay CACHE.db or --live") end
  if opts.replay then
    if not fs.exists(opts.replay) or fs.is_dir(opts.replay) then return fail("--replay " .. opts.replay .. ": no such database") end
    -- a file that is not SQLite would fail every call of every run, and the table would not show it
    local f = io.open(opts.replay, "rb")
    local head = f and f:read(16)
    if f then f:close() end
    if head ~= "SQLite format 3\0" then
      return fail("--replay " .. opts.replay .. ": not an LLM record (an SQLite database written by --live or KAGENT_LLM_CACHE=record)")
    end
  end
  -- the run's model (a --model without a role; role models pass on to the runs as given)
  local model = require("agents.run").model_plan(opts)
  model = model and model.default or os.getenv("KAGENT_MODEL")
  if not model or model == "" then
    return fail("name the model (--model provider:model or KAGENT_MODEL): replayed answers are keyed on it, and a live comparison fixes it")
  end

  -- the runs' options as given (the model reaches the runs as KAGENT_MODEL), then "-- extra"
  if opts.live and opts.temperature == nil then opts.temperature = 0 end
  local pass = run_args.args(PASS, opts, #extra > 0 and { "--" } or {})
  for _, a in ipairs(extra) do pass[#pass + 1] = a end
  -- an option a policy's script does not take would fail each of its runs: refused before any
  for _, p in ipairs(policies) do
    local aerr = plan_lib.args_error(p, opts.kernels, pass)
    if aerr then return fail("policy " .. p .. ": " .. aerr) end
  end

  local out = opts.out or fs.join("runs", "compare_" .. os.date("!%Y%m%d-%H%M%S"))
  local _, oerr, ocode = run_lib.out_dir(PROG, out)
  if oerr then return ocode end
  local cache = opts.replay and fs.abspath(opts.replay) or fs.abspath(fs.join(out, "llm_cache.db"))
  -- the LLM for every run of every policy: the recorded cache (strict: a miss is never sent), or
  -- the live model recording into this comparison's cache
  local env = { KAGENT_LLM_CACHE = opts.replay and "replay" or "record", KAGENT_LLM_DB = cache, KAGENT_MODEL = model,
    KAGENT_SEED = tostring(opts.seed) }
  local llm_text = opts.replay and string.format("replayed from %s (model %s; nothing sent)", cache, model)
    or string.format("live %s, seed %d, recorded into %s", model, opts.seed, cache)
  io.stderr:write(string.format("%s: %d policies over %d problem(s); LLM %s; folder %s\n", PROG, #policies, #problems,
    llm_text, out))

  local list, failed = {}, {}
  for _, p in ipairs(policies) do
    io.stderr:write(string.format("%s: policy %s\n", PROG, p))
    local code, serr = sweep(p, { problems = table.concat(problems, ","), kernels = opts.kernels, out = out,
      devices = opts.devices, max_concurrent = opts.max_concurrent, run_args = pass, env = env })
    if code == nil then return fail("cannot start agents/sweep.lua: " .. tostring(serr), 1) end
    if code ~= 0 and code ~= 1 then failed[#failed + 1] = string.format("%s (sweep exited %d)", p, code) end
    local dir = fs.join(out, folder_name(p))
    local plan = plan_lib.load(dir)
    if plan and plan.aggregate then
      list[#list + 1] = results.policy_result(folder_name(p), plan, dir)
    else
      failed[#failed + 1] = p .. " (no sweep results in " .. dir .. ")"
    end
  end
  local meta = { problems = #problems, llm = llm_text, mode = opts.replay and "replay" or "live", model = model,
    cache = cache, seed = opts.live and opts.seed or json.null, run_args = table.concat(pass, " "),
    policies = policies }
  local text = results.table_text(list, meta)
  fs.write(fs.join(out, "compare.md"), text .. "\n")
  fs.write(fs.join(out, "compare.json"), json.encode(results.json_doc(list, meta), { pretty = true }) .. "\n")
  local page, herr = results.write_html(out, list, meta)
  if not page then io.stderr:write(PROG .. ": index.html: " .. tostring(herr) .. "\n") end
  print(text)
  print(string.format("\ncomparison folder: %s (compare.json, compare.md, index.html; one sweep folder per policy)", out))
  if #failed > 0 then return fail("did not finish: " .. table.concat(failed, "; "), 1) end
  local misses = 0
  for _, r in ipairs(list) do misses = misses + r.replay.misses end
  if opts.replay and misses > 0 then
    return fail(string.format("strict replay: %d LLM call(s) had no recorded answer; their branches stopped "
      .. "(replay_misses.json in those runs). The comparison does not reproduce the recorded one.", misses), 4)
  end
  return 0
end

return main(kagent.args)
