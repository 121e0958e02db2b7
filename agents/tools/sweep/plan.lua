-- A sweep's plan: the problems (each with its kernel), the policy and its options, and the
-- folder everything goes to. sweep.json holds the plan, so a sweep resumes, and a Slurm task
-- runs its problem, from the folder alone. M.command is the one place a policy name becomes a
-- command line.
local fs = require("kagent.fs")
local json = require("kagent.json")

local M = {}

-- Policy name -> entry point under agents/. beam.lua also takes --policy NAME for the strategies
-- it runs (beam, greedy, or a path to a policy file); tune.lua is the LLM-free tuner.
-- fuse is agents/fuse.lua (Levels 2 and 3): each problem routed, decomposed, given a first program
-- and LLM kernels; with `-- --no-llm` it needs no LLM.
local ENTRY = { beam = "beam.lua", greedy = "beam.lua", tune = "tune.lua", skill = "skill.lua", fuse = "fuse.lua" }
local NEEDS_LLM = { beam = true, greedy = true, skill = true, fuse = true }

local function is_policy_file(name) return name:match("%.lua$") ~= nil end

-- entry(policy) -> absolute path of the entry script, or nil, message
function M.entry(policy)
  local e = ENTRY[policy] or (is_policy_file(policy) and "beam.lua")
  if not e then
    return nil, string.format("unknown policy %q (known: beam, greedy, tune, skill, fuse, or a path to a policy .lua file)", policy)
  end
  if is_policy_file(policy) and not fs.exists(policy) then return nil, "no policy file " .. policy end
  -- through the search path: a user's own copy of an entry point wins (docs/lua-api.md)
  local path = kagent.resolve(fs.join("agents", e))
  if not path then return nil, string.format("policy %s needs agents/%s, which is not on kagent.path", policy, e) end
  return fs.abspath(path)
end

-- args_error(policy, kernels, args) -> nil, or why every run would refuse its command line: an
-- option (among the runs' own options and those after --) that the policy's entry point does not
-- take, or --kernels for one that starts from the problem alone (fuse.lua takes no --kernel)
function M.args_error(policy, kernels, args)
  local e = ENTRY[policy] or "beam.lua"
  local spec = e == "fuse.lua" and require("agents.flows.fuse_options") or require("agents.run.options")
  if kernels and not spec.kernel then
    return string.format("--kernels: agents/%s starts from the problem alone and takes no --kernel", e)
  end
  for _, a in ipairs(args or {}) do
    local name = a:match("^%-%-([%w][%w%-]*)")
    if name and not spec[name] then
      return string.format("the runs' option --%s: agents/%s does not take it (its options: kagent-rt agents/%s --help)",
        name, e, e)
    end
  end
end

-- needs_llm(policy, args) -> whether the runs call an LLM (args: the runs' own options)
function M.needs_llm(policy, args)
  if policy == "fuse" then
    for _, a in ipairs(args or {}) do if a == "--no-llm" then return false end end
  end
  return NEEDS_LLM[policy] or is_policy_file(policy)
end

-- command(plan, p, extra) -> argv after the kagent-rt binary, for problem entry `p`.
-- extra: resume (run folder to continue), devices ("0,1" | "cpu").
function M.command(plan, p, extra)
  local argv = { (assert(M.entry(plan.policy))) }
  if ENTRY[plan.policy] == "beam.lua" or is_policy_file(plan.policy) then
    argv[#argv + 1] = "--policy"
    argv[#argv + 1] = plan.policy
  end
  local function add(...) for _, a in ipairs({ ... }) do argv[#argv + 1] = a end end
  add("--problem", p.problem, "--out", M.runs_dir(plan, p))
  if p.kernel then add("--kernel", p.kernel) end
  if extra and extra.resume then add("--resume", extra.resume) end
  if extra and extra.devices then add("--devices", extra.devices) end
  for _, a in ipairs(plan.policy_args) do add(a) end
  return argv
end

-- Problems ----------------------------------------------------------------------------------------

local function stem(path) return (fs.basename(path):gsub("%.py$", "")) end

-- Natural order, so 4_x comes before 36_x (also agents/bench.lua's order of problems).
local function natural_less(a, b)
  local na, nb = tonumber(a:match("^(%d+)")), tonumber(b:match("^(%d+)"))
  if na and nb and na ~= nb then return na < nb end
  if (na == nil) ~= (nb == nil) then return na ~= nil end
  return a < b
end
M.natural_less = natural_less

-- problem_paths(spec) -> sorted absolute paths, or nil, message. spec: a folder (its *.py), a
-- list file (one path per line, relative to the list's folder; # comments), or paths joined
-- with commas.
function M.problem_paths(spec)
  local paths = {}
  if fs.is_dir(spec) then
    for _, n in ipairs(fs.list(spec) or {}) do
      if n:match("%.py$") and not n:match("^_") then paths[#paths + 1] = fs.join(spec, n) end
    end
    table.sort(paths, function(a, b) return natural_less(fs.basename(a), fs.basename(b)) end)
  elseif spec:find(",") or spec:match("%.py$") then
    for p in spec:gmatch("[^,]+") do paths[#paths + 1] = p end
  elseif fs.exists(spec) then
    local base = fs.dirname(spec)
    for line in (fs.read(spec) or ""):gmatch("[^\n]+") do
      line = line:gsub("#.*$", ""):gsub("^%s+", ""):gsub("%s+$", "")
      if line ~= "" then paths[#paths + 1] = line:sub(1, 1) == "/" and line or fs.join(base, line) end
    end
  else
    return nil, "--problems " .. spec .. ": no such folder or list file"
  end
  if #paths == 0 then return nil, "--problems " .. spec .. ": no problem files" end
  local seen = {}
  for i, p in ipairs(paths) do
    if not fs.exists(p) then return nil, "no problem file " .. p end
    local name = stem(p)
    if seen[name] then return nil, string.format("two problems are named %s (%s and %s)", name, seen[name], p) end
    seen[name] = p
    paths[i] = fs.abspath(p)
  end
  return paths
end

-- Folders -----------------------------------------------------------------------------------------
-- <sweep>/sweep.json            the plan, each problem's state and the aggregates
-- <sweep>/table.md              the table printed at the end
-- <sweep>/runs/<name>/<run id>/ the run directory of each try of a problem (--out of the run)
-- <sweep>/tasks/<name>.json     what ran for the problem: launches, exit status, run folder
-- <sweep>/tasks/<name>.db       Slurm: the task's own database, merged at the end
-- <sweep>/logs/<name>.log       the run's stdout and stderr
-- <sweep>/slurm/                Slurm: batch script, submitted jobs, database seed

function M.runs_dir(plan, p) return fs.join(plan.dir, "runs", p.name) end
function M.task_path(plan, p, ext) return fs.join(plan.dir, "tasks", p.name .. (ext or ".json")) end
function M.log_path(plan, p) return fs.join(plan.dir, "logs", p.name .. ".log") end

-- new(opts) -> plan, or nil, message. opts: problems, policy, kernels, out, policy_args, db,
-- slurm (table or nil), devices, max_concurrent.
function M.new(o)
  local paths, err = M.problem_paths(o.problems)
  if not paths then return nil, err end
  local entry_ok, eerr = M.entry(o.policy)
  if not entry_ok then return nil, eerr end
  local aerr = M.args_error(o.policy, o.kernels, o.policy_args)
  if aerr then return nil, aerr end
  local problems = {}
  for i, path in ipairs(paths) do
    local p = { index = i, name = stem(path), problem = path }
    if o.kernels then
      local k = fs.join(o.kernels, p.name .. ".py")
      if fs.exists(k) then p.kernel = fs.abspath(k) end
    end
    if not p.kernel and o.policy == "tune" then
      return nil, string.format("the tune policy needs a kernel for %s: no %s", p.name,
        o.kernels and fs.join(o.kernels, p.name .. ".py") or "--kernels folder given")
    end
    problems[i] = p
  end
  return {
    version = 1, dir = fs.abspath(o.out), policy = is_policy_file(o.policy) and fs.abspath(o.policy) or o.policy,
    kernels = o.kernels and fs.abspath(o.kernels) or json.null, policy_args = o.policy_args or {},
    db = fs.abspath(o.db), mode = o.slurm and "slurm" or "local", slurm = o.slurm or json.null,
    devices = o.devices or json.null, max_concurrent = o.max_concurrent or json.null,
    run_time = o.run_time or json.null,
    problems = problems, created = os.date("!%Y-%m-%dT%H:%M:%SZ"),
  }
end

function M.path(dir) return fs.join(dir, "sweep.json") end

-- load(dir) -> the sweep.json table (plan fields plus results), or nil
function M.load(dir)
  local s = fs.read(M.path(dir))
  if not s then return nil end
  local t = json.decode(s)
  if type(t) ~= "table" or type(t.problems) ~= "table" then return nil end
  t.dir = fs.abspath(dir)
  return t
end

function M.save(plan)
  for _, d in ipairs({ "runs", "tasks", "logs" }) do fs.mkdir_p(fs.join(plan.dir, d)) end
  local ok, err = fs.write(M.path(plan.dir), json.encode(plan, { pretty = true }) .. "\n")
  if not ok then error("sweep: cannot write " .. M.path(plan.dir) .. ": " .. tostring(err)) end
end

return M
