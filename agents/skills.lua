-- agents/skills.lua: the skills and what memory has learned about them.
--   kagent-rt agents/skills.lua --stats [--db D] [--gpu G] [--op-class C] [--bottleneck B]
--       the learned table: per GPU, op class and bottleneck class, each skill's attempts,
--       successes, success rate, median gain over the parent and the score retrieval ranks by
--   kagent-rt agents/skills.lua --list
--       every skill in skills/ with its category and intent
--   kagent-rt agents/skills.lua --retrieve --metrics M.json --problem P [--kernel K] [--dtype D]
--       the skill policy's retrieval decision for a profile (*_ncu_metrics.json of one kernel)

local fs, json = kagent.fs, kagent.json
local run_lib = require("agents.run")
local skills_lib = require("agents.lib.skills")

local PROG = "agents/skills.lua"
local SPEC = {
  stats = { type = "boolean", default = false, help = "print the learned table" },
  list = { type = "boolean", default = false, help = "list the skills" },
  retrieve = { type = "boolean", default = false, help = "show the retrieval decision for --metrics" },
  db = { type = "string", help = "--stats: the memory database (default KAGENT_DB or runs/kagent.db)" },
  gpu = { type = "string", help = "--stats: only this GPU (as runs record it, e.g. \"NVIDIA H100 80GB HBM3\" or cpu)" },
  ["op-class"] = { type = "string", choices = { "gemm", "conv", "pool", "reduction", "elementwise" }, help = "--stats: only this op class" },
  bottleneck = { type = "string", help = "--stats: only this bottleneck class" },
  metrics = { type = "string", help = "--retrieve: an *_ncu_metrics.json file with one kernel" },
  problem = { type = "string", help = "--retrieve: the problem file (op class)" },
  kernel = { type = "string", help = "--retrieve: the kernel file (code features)" },
  dtype = { type = "string", choices = { "fp32", "bf16", "fp16" }, default = "fp32", help = "--retrieve: the precision" },
}
local HOW = { usage = "kagent-rt agents/skills.lua --stats|--list|--retrieve [options]",
  about = "The skills (skills/*.lua and your own) and what memory has learned about them." }

local function stats(opts)
  -- reading only: a database that is not there is not made (a typo in --db leaves no stray file)
  local path = opts.db or kagent.mem.default_path()
  if not fs.exists(path) then
    if opts.db then io.stderr:write(PROG .. ": --db " .. opts.db .. ": no such memory database\n"); return 2 end
    print("no skill outcomes recorded (no memory database at " .. path .. " yet)")
    return 0
  end
  local db, err = kagent.mem.open(path)
  if not db then io.stderr:write(PROG .. ": " .. tostring(err) .. "\n"); return 2 end
  local rows = require("agents.run.memory").skill_table(db, { gpu = opts.gpu, op_class = opts.op_class,
    bottleneck = opts.bottleneck })
  db:close()
  if #rows == 0 then print("no skill outcomes recorded" .. (opts.db and (" in " .. opts.db) or "")); return 0 end
  local fmt = "%-24s %-12s %-18s %-24s %8s %9s %6s %11s %6s"
  print(string.format(fmt, "gpu", "op class", "bottleneck", "skill", "attempts", "successes", "rate", "median gain", "score"))
  for _, r in ipairs(rows) do
    local score = skills_lib.score(0, r)
    print(string.format(fmt, tostring(r.gpu):sub(1, 24), tostring(r.op_class), tostring(r.bottleneck), r.skill,
      r.attempts, r.successes, string.format("%.2f", r.success_rate),
      r.median_gain and string.format("%.3fx", r.median_gain) or "-", string.format("%.3f", score)))
  end
  return 0
end

local function list()
  for _, s in ipairs(skills_lib.load()) do
    print(string.format("%-24s %-10s %s", s.name, s.category, s.intent))
  end
  return 0
end

local function retrieve(opts)
  if not (opts.metrics and opts.problem) then
    io.stderr:write(PROG .. ": --retrieve needs --metrics and --problem\n"); return 2
  end
  local function bad(msg) io.stderr:write(PROG .. ": " .. msg .. "\n"); return 2 end
  local m = json.decode(fs.read(opts.metrics) or "")
  if type(m) ~= "table" then return bad("cannot read " .. opts.metrics .. " as JSON") end
  local kernels = 0
  for k, v in pairs(m) do
    if type(k) == "string" and type(v) == "table" and next(v) ~= nil then kernels = kernels + 1 end
  end
  if kernels == 0 then
    return bad(opts.metrics .. " holds no kernel's metrics ({kernel name = {metric = value}}, as *_ncu_metrics.json)")
  end
  local problem = fs.read(opts.problem)
  if not problem then return bad("--problem " .. opts.problem .. ": no such file") end
  local kernel = opts.kernel and fs.read(opts.kernel)
  if opts.kernel and not kernel then return bad("--kernel " .. opts.kernel .. ": no such file") end
  local p = require("agents.lib.metrics").summarize({ metrics = m })
  local f = require("agents.lib.features").extract(kernel or "", problem, opts.dtype)
  local d = require("agents.lib.retrieval").retrieve(skills_lib.load(), p, f, {})
  print(json.encode(d, { pretty = true }))
  return 0
end

local function main(argv)
  local opts, _, code = run_lib.parse(PROG, argv, SPEC, HOW)
  if not opts then return code end
  local modes = (opts.stats and 1 or 0) + (opts.list and 1 or 0) + (opts.retrieve and 1 or 0)
  if modes ~= 1 then
    io.stderr:write(PROG .. ": say what to show: one of --stats, --list or --retrieve (--help lists the options)\n")
    return 2
  end
  -- an option of another mode would be ignored: said instead
  local OWN = { gpu = "stats", op_class = "stats", bottleneck = "stats", metrics = "retrieve", problem = "retrieve",
    kernel = "retrieve", dtype = "retrieve", db = "stats" }
  for k, mode in pairs(OWN) do
    if opts._given[k] and not opts[mode] then
      io.stderr:write(string.format("%s: --%s is an option of --%s\n", PROG, (k:gsub("_", "-")), mode))
      return 2
    end
  end
  if opts.stats then return stats(opts) end
  if opts.list then return list() end
  return retrieve(opts)
end

return main(kagent.args)
