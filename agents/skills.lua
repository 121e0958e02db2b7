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
  db = { type = "string", help = "memory database (default KAGENT_DB or runs/kagent.db)" },
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
  local db, err = kagent.mem.open(opts.db)
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
  local m = json.decode(fs.read(opts.metrics) or "")
  if type(m) ~= "table" then io.stderr:write(PROG .. ": cannot read " .. opts.metrics .. "\n"); return 2 end
  local p = require("agents.lib.metrics").summarize({ metrics = m })
  local f = require("agents.lib.features").extract(opts.kernel and fs.read(opts.kernel) or "", fs.read(opts.problem) or "", opts.dtype)
  local d = require("agents.lib.retrieval").retrieve(skills_lib.load(), p, f, {})
  print(json.encode(d, { pretty = true }))
  return 0
end

local function main(argv)
  local opts, _, code = run_lib.parse(PROG, argv, SPEC, HOW)
  if not opts then return code end
  if opts.stats then return stats(opts) end
  if opts.list then return list() end
  if opts.retrieve then return retrieve(opts) end
  io.stderr:write(PROG .. ": say what to show: --stats, --list or --retrieve (--help lists the options)\n")
  return 2
end

return main(kagent.args)
