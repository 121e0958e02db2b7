-- The KernelBench table of a sweep (agents/sweep.lua --kernelbench): per level, the problems,
-- those compiled and correct, fast_0 and fast_1 against eager and against torch.compile, the
-- geometric mean speedups and the GPU time; then every problem as a row, with its result, the
-- stage and reason of a refusal, or that the machine left it unmeasured. docs/sweeps.md and
-- docs/agents.md define the figures. Pure functions over figures.row's rows: no files.
local json = require("kagent.json")

local M = {}

M.P = { 0, 1 }  -- fast_p thresholds, as KernelBench reports them

M.DEFINITIONS = {
  level = "the KernelBench level: the problem file's folder, levelN",
  compiled = "problems whose run gave a program that built and ran: correct, or refused only for its outputs (EMISMATCH) or for the machine (not measured)",
  correct = "problems whose run ended with a verified kernel (summary.verified)",
  fast_p = "fast_p vs X = (problems correct AND with speedup vs X > p) / problems of the level, p = 0 and 1 (KernelBench's fast_p); a problem with no measured X counts as not fast",
  geomean = "exp(mean(log speedup)) over the level's correct problems with that baseline measured (n)",
  gpu_hours = "sum over the level's launches of run time x GPUs held (0 in CPU mode)",
  not_measured = "a row the machine left unmeasured (ENOISY: too noisy to time; EMEMORY: out of memory; exit 7: no finalist measured): the kernel is not judged, run it again",
}

local MACHINE = { "ENOISY", "EMEMORY" }

-- level_of(path) -> the level number of a KernelBench problem path (".../level2/x.py"), or nil
function M.level_of(path)
  return tonumber(tostring(path):match("level(%d+)/[^/]+$"))
end

-- outcome(r) -> {compiled, machine (why it was not measured, or nil), stage, reason} of a row
function M.outcome(r)
  local f = r.fuse or {}
  local stage, reason = f.first_stage, f.first_reason
  if not stage and not r.verified and r.summary_error then stage, reason = r.stop_reason or "run", r.summary_error end
  if not stage and r.error then stage, reason = "run", r.error end
  local text = tostring(reason or "")
  local machine
  if r.exit_code == 7 or r.not_measured then machine = "exit 7: no finalist measured (the machine too noisy)" end
  for _, code in ipairs(MACHINE) do
    if not machine and text:find(code, 1, true) then machine = code .. ": " .. text end
  end
  local compiled = r.verified == true or machine ~= nil or text:find("EMISMATCH", 1, true) ~= nil
  return { compiled = compiled, machine = machine, stage = stage, reason = reason }
end

local function new_level()
  local fast = {}
  for _, b in ipairs({ "eager", "compile" }) do
    fast[b] = {}
    for _, p in ipairs(M.P) do fast[b][tostring(p)] = 0 end
  end
  return { problems = 0, finished = 0, compiled = 0, correct = 0, not_measured = 0, fast = fast,
    speedups = { eager = {}, compile = {} }, gpu_hours = 0, problem_s = 0 }
end

-- aggregate(rows) -> {levels = {{level, problems, finished, compiled, correct, not_measured,
-- fast_p = {eager|compile = {["0"], ["1"]}}, geomean = {eager|compile = {n, value}}, gpu_hours,
-- problem_s}}, sorted by level; a row with no level counts under level "-"}
function M.aggregate(rows)
  local by, order = {}, {}
  local geomean = require("agents.tools.sweep.figures").geomean
  for _, r in ipairs(rows) do
    local key = r.level and tostring(r.level) or "-"
    if not by[key] then by[key] = new_level(); order[#order + 1] = key end
    local l = by[key]
    local o = M.outcome(r)
    l.problems = l.problems + 1
    if r.status == "done" or r.status == "unconfirmed" then l.finished = l.finished + 1 end
    if o.compiled then l.compiled = l.compiled + 1 end
    if o.machine then l.not_measured = l.not_measured + 1 end
    l.gpu_hours, l.problem_s = l.gpu_hours + (r.gpu_hours or 0), l.problem_s + (r.problem_s or 0)
    if r.verified then
      l.correct = l.correct + 1
      for b, list in pairs(l.speedups) do
        local s = r.speedup and r.speedup[b]
        if type(s) == "number" and s > 0 then list[#list + 1] = s end
        for _, p in ipairs(M.P) do
          if type(s) == "number" and s > p then l.fast[b][tostring(p)] = l.fast[b][tostring(p)] + 1 end
        end
      end
    end
  end
  table.sort(order, function(a, b) return (tonumber(a) or math.huge) < (tonumber(b) or math.huge) end)
  local out = {}
  for _, key in ipairs(order) do
    local l = by[key]
    local e = { level = tonumber(key) or key, problems = l.problems, finished = l.finished, compiled = l.compiled,
      correct = l.correct, not_measured = l.not_measured, gpu_hours = l.gpu_hours, problem_s = l.problem_s,
      fast_p = {}, geomean = {} }
    for b, list in pairs(l.speedups) do
      e.fast_p[b] = {}
      -- no problem of the level measured this baseline: no figure, not a zero (figures.lua's rule)
      for p, c in pairs(l.fast[b]) do e.fast_p[b][p] = #list > 0 and c / l.problems or json.null end
      e.geomean[b] = { n = #list, value = geomean(list) or json.null }
    end
    out[#out + 1] = e
  end
  return { levels = out }
end

local function pct(v) return type(v) == "number" and string.format("%.0f%%", 100 * v) or "-" end
local function x(v) return type(v) == "number" and string.format("%.3f", v) or "-" end
local function cell(s) return (tostring(s):gsub("|", "\\|"):gsub("\n", " ")) end

-- result_text(r) -> a row's result: "correct, faster than eager", "correct", "not measured (the
-- machine): ...", "refused at STAGE: reason", "pending", "running"; "; shrunk: sizes" after it
-- where the run worked on the problem made smaller (--shrink: its figures are not full-size ones)
function M.result_text(r)
  local text = M.result_word(r)
  if type(r.shrunk) == "table" then text = text .. "; shrunk: " .. require("agents.run.shrink").text(r.shrunk) end
  return text
end

function M.result_word(r)
  local o = M.outcome(r)
  if r.verified then
    local s = r.speedup and r.speedup.eager
    return (type(s) == "number" and s > 1) and "correct, faster than eager" or "correct"
  end
  if o.machine then return "not measured (the machine): " .. o.machine end
  if r.status == "pending" or r.status == "running" then return r.status end
  if o.stage then return string.format("refused at %s: %s", o.stage, tostring(o.reason)) end
  return "no verified kernel"
end

-- table_text(rows, agg, cpu) -> the level table and the problem rows (Markdown)
function M.table_text(rows, agg, cpu)
  local out = {
    "| level | problems | finished | compiled | correct | fast_0 eager | fast_1 eager | fast_0 compile | fast_1 compile | geomean x eager | geomean x compile | not measured | GPU-hours | run time s |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
  }
  for _, l in ipairs(agg.levels) do
    out[#out + 1] = string.format("| %s | %d | %d | %d | %d | %s | %s | %s | %s | %s (n=%d) | %s (n=%d) | %d | %s | %.0f |",
      tostring(l.level), l.problems, l.finished, l.compiled, l.correct, pct(l.fast_p.eager["0"]), pct(l.fast_p.eager["1"]),
      pct(l.fast_p.compile["0"]), pct(l.fast_p.compile["1"]), x(l.geomean.eager.value), l.geomean.eager.n,
      x(l.geomean.compile.value), l.geomean.compile.n, l.not_measured,
      cpu and "0 (CPU mode)" or string.format("%.3f", l.gpu_hours), l.problem_s)
  end
  out[#out + 1] = ""
  out[#out + 1] = "| level | problem | status | compiled | correct | x eager | x compile | result |"
  out[#out + 1] = "|---|---|---|---|---|---|---|---|"
  for _, r in ipairs(rows) do
    local o = M.outcome(r)
    out[#out + 1] = string.format("| %s | %s | %s | %s | %s | %s | %s | %s |", tostring(r.level or "-"), r.name, r.status,
      o.compiled and "yes" or "no", r.verified and "yes" or "no", x(r.speedup and r.speedup.eager),
      x(r.speedup and r.speedup.compile), cell(M.result_text(r):sub(1, 240)))
  end
  return table.concat(out, "\n")
end

return M
