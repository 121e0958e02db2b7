-- A sweep's figures: one row per problem (from its run's summary.json and its task record) and
-- the aggregates over them, with their definitions (docs/sweeps.md says the same in prose).
-- Pure functions: no files, no processes.
local json = require("kagent.json")
local keys_lib = require("agents.lib.keys")
local verdict = require("agents.lib.verdict")
local stats = require("agents.lib.stats")
local baselines = require("agents.lib.baselines")
local generality = require("agents.lib.generality")
local text_section = require("agents.lib.text_section")
local own_share = require("agents.lib.own_share")

local M = {}

M.THRESHOLDS = { 1.0, 1.2 }

M.DEFINITIONS = {
  problems = "problems in the sweep, finished or not",
  correct = "problems whose run finished with its best kernel verified (summary.verified); a problem that failed or did not finish counts as not correct; a best that fails on the problem resized counts, its row saying \"only at the problem's shapes\" (summary.generalization)",
  correctness_rate = "correct / problems",
  speedup = "baseline median time / best kernel median time, both from the run's final re-measure: one evaluator job times the best kernel and the baselines by the same method (warm-up, L2 flush before each call on a GPU, device-wide sync, median of the timed calls), in the run's dtype",
  baselines = "eager: the problem's PyTorch Model as written; compile: torch.compile of the same Model (default mode); input: the kernel the run started from, re-timed beside the best",
  fast_p = "fast_p vs X = (problems that are correct AND have speedup vs X > p) / problems; a problem with no measured X baseline counts as not fast",
  geomean = "exp(mean(log speedup)) over the correct problems with that baseline measured (n)",
  mean = "arithmetic mean of the same speedups; min, median and max give the per-problem spread",
  tokens = "sum over problems of the run's LLM tokens (input + output + cache read + cache write)",
  cost_usd = "sum over problems of the run's LLM cost",
  wall_s = "time the sweep driver ran, summed over its sessions (a killed session until its last note, every 15 s)",
  problem_s = "sum over problems of the time their runs ran (all launches; an interrupted launch until its last heartbeat)",
  time_split = "per problem, the run's wall time in its three parts (summary.json time_split): baselines_s, the start (the first kernel timed beside eager and torch.compile, cached ones re-checked); search_s, the rounds; confirm_s, the final confirmation; and whether the final's baselines were measured, cached, completed (cached, the missing ones measured) or measured again after a failed re-check",
  gpu_hours = "sum over launches of run time x GPUs held by the launch, / 3600 (0 in CPU mode)",
  attempts_to_best = "per problem, the attempts made in the rounds up to and including the one that found its best kernel (0 when the first kernel stays best); n, mean, min, median, max over the correct problems",
  own = "per problem, for its best kernel: " .. own_share.DEFINITION .. " (summary.json own_share, library_kernels; sweep.json's rows the same keys)",
  replay = "LLM calls of the runs answered from the record/replay cache (hits), asked with no recorded answer (misses: in strict replay their branches stopped), and sent to the provider (sent)",
}

local function num(v) return type(v) == "number" and v or nil end

local function launch_seconds(l)
  local stop = l.finished or l.alive or l.started
  return math.max(0, (num(stop) or 0) - (num(l.started) or 0))
end

-- row(p, summary, rec) -> one problem's figures. summary: its run's summary.json (nil if the
-- run did not finish); rec: its task record (nil if it never started).
function M.row(p, summary, rec)
  local r = { name = p.name, status = rec and rec.status or "pending", launches = rec and #(rec.launches or {}) or 0 }
  local secs, gpu_s = 0, 0
  for _, l in ipairs(rec and rec.launches or {}) do
    local s = launch_seconds(l)
    secs = secs + s
    gpu_s = gpu_s + s * (num(l.gpus) or 0)
  end
  r.problem_s, r.gpu_hours = secs, gpu_s / 3600
  if summary then
    local b = summary.baselines or {}
    -- figures only from a confirmed run: a figure that was not confirmed is not a result
    r.verified, r.correct = verdict.reportable(summary), verdict.verdict_word(summary)
    -- the baselines its summary lists: those the run's evaluator reported (its ready line's)
    r.baselines = baselines.listed(b)
    r.input_ms = num(summary.input_ms)
    for _, name in ipairs(r.baselines) do r[name .. "_ms"] = num(b[name .. "_ms"]) end
    r.best_ms = r.verified and num(summary.best_ms) or nil
    -- a best that works only at the problem's shapes says so beside its verdict
    r.shapes = r.verified and generality.of_summary(summary) or nil
    r.speedup = {}
    if r.verified then
      for _, name in ipairs(r.baselines) do r.speedup[name] = num(summary["speedup_vs_" .. name]) end
      r.speedup.input = num(summary.speedup_vs_input)
    end
    r.tokens = summary.tokens and num(summary.tokens.total) or 0
    r.cost_usd = num(summary.cost_usd) or 0
    r.rounds, r.stop_reason, r.attempts = summary.rounds, summary.stop_reason, summary.attempts
    r.attempts_to_best = num(summary.attempts_to_best)
    local rp = type(summary.replay) == "table" and summary.replay or {}
    r.replay = { hits = num(rp.hits) or 0, misses = num(rp.misses) or 0, sent = num(rp.sent) or 0, calls = num(rp.calls) or 0 }
    r.dtype, r.device, r.run_id = summary.dtype, summary.device, summary.run_id
    -- where the run's time went (summary.time_split) and whether its baselines came from memory
    local ts = type(summary.time_split) == "table" and summary.time_split or {}
    r.time_split = { baselines_s = num(ts.baselines_s), search_s = num(ts.search_s), confirm_s = num(ts.confirm_s) }
    r.baselines_source = type(summary.baselines) == "table" and type(summary.baselines.source) == "string"
      and summary.baselines.source or nil
    -- what each model of the run did (summary.json's `models`, agents/run/models.lua)
    r.models = type(summary.models) == "table" and summary.models or nil
    r.fuse = require("agents.tools.sweep.fuse_rows").row(summary)
    -- what carried the best's GPU time (its verdict's, agents/lib/own_share.lua)
    own_share.copy(r, summary, "not in summary.json (a run from before it recorded the share)")
  else
    r.verified, r.correct, r.speedup, r.tokens, r.cost_usd = false, "no", {}, 0, 0
  end
  r.error = rec and rec.status == "failed" and rec.error or nil
  -- what the KernelBench table (levels.lua) reads: the level, and why a run ended without a kernel
  r.level = p.level
  r.exit_code = rec and rec.exit_code or nil
  if summary then
    r.not_measured = summary.not_measured and true or nil
    r.summary_error = type(summary.error) == "string" and summary.error or nil
    r.shrunk = type(summary.shrunk) == "table" and summary.shrunk or nil
  end
  return r
end

-- the statistics of its tables (agents/lib/stats.lua, which fuse_rows.lua shares)
M.median, M.geomean, M.mean, M.stats = stats.median, stats.geomean, stats.mean, stats.stats

-- names(rows) -> the baselines the rows' summaries list, in baselines.saved's order
function M.names(rows)
  local listed = {}
  for _, r in ipairs(rows) do
    for _, name in ipairs(r.baselines or {}) do listed[name .. "_ms"] = json.null end
  end
  return baselines.listed(listed)
end

-- aggregate(rows, extra) -> the sweep's figures over the baselines its runs reported (M.names).
-- extra: wall_s, cpu (true in CPU mode).
function M.aggregate(rows, extra)
  extra = extra or {}
  local n, correct, finished, failed = #rows, 0, 0, 0
  local tokens, cost, problem_s, gpu_h = 0, 0, 0, 0
  local names = M.names(rows)
  local speedups, missing, fast = { input = {} }, {}, {}
  for _, b in ipairs(names) do
    speedups[b], missing[b] = {}, 0
    fast[b] = {}
    for _, p in ipairs(M.THRESHOLDS) do fast[b][string.format("%.1f", p)] = 0 end
  end
  local dtypes, devices = {}, {}
  local to_best, replay = {}, { hits = 0, misses = 0, sent = 0, calls = 0 }
  for _, r in ipairs(rows) do
    for k in pairs(replay) do replay[k] = replay[k] + (r.replay and r.replay[k] or 0) end
    if r.verified and r.attempts_to_best then to_best[#to_best + 1] = r.attempts_to_best end
    if r.status == "done" or r.status == "unconfirmed" then finished = finished + 1 end
    if r.status == "failed" then failed = failed + 1 end
    tokens, cost = tokens + (r.tokens or 0), cost + (r.cost_usd or 0)
    problem_s, gpu_h = problem_s + (r.problem_s or 0), gpu_h + (r.gpu_hours or 0)
    if r.dtype then dtypes[r.dtype] = true end
    if r.device then devices[r.device] = true end
    if r.verified then
      correct = correct + 1
      for name, list in pairs(speedups) do
        local s = r.speedup[name]
        if s and s > 0 then list[#list + 1] = s elseif missing[name] then missing[name] = missing[name] + 1 end
      end
      for _, b in ipairs(names) do
        local s = r.speedup[b]
        for _, p in ipairs(M.THRESHOLDS) do
          if s and s > p then
            local k = string.format("%.1f", p)
            fast[b][k] = fast[b][k] + 1
          end
        end
      end
    end
  end
  local fast_p, speedup = {}, { input = M.stats(speedups.input) }
  for _, b in ipairs(names) do
    speedup[b] = M.stats(speedups[b])
    fast_p[b] = {}
    for k, c in pairs(fast[b]) do
      -- with no problem measuring this baseline there is no figure, not a zero
      fast_p[b][k] = (#speedups[b] > 0 and n > 0) and c / n or json.null
    end
  end
  return {
    problems = n, finished = finished, failed = failed, correct = correct,
    correctness_rate = n > 0 and correct / n or json.null,
    fast_p = fast_p,
    baselines = names, speedup = speedup, baseline_missing = missing,
    tokens = tokens, cost_usd = cost, wall_s = extra.wall_s or json.null, problem_s = problem_s,
    gpu_hours = gpu_h, cpu_mode = extra.cpu == true,
    attempts_to_best = M.stats(to_best), replay = replay,
    dtypes = keys_lib.sorted(dtypes), devices = keys_lib.sorted(devices),
  }
end

-- Table ---------------------------------------------------------------------------------------------

local function f(v, fmt) return type(v) == "number" and string.format(fmt, v) or "-" end

local hms = require("agents.tools.report.html").hms
M.hms = hms

-- table_text(rows, agg) -> the table printed at the end of a sweep (Markdown, so it reads on a
-- terminal and pastes into docs/results/).
function M.table_text(rows, agg)
  local names = agg.baselines or M.names(rows)
  local head = { "problem", "status", "correct", "input ms", "best ms" }
  for _, b in ipairs(names) do head[#head + 1] = b .. " ms" end
  for _, b in ipairs(names) do head[#head + 1] = "x " .. b end
  for _, c in ipairs({ "x input", "own", "rounds", "tokens", "cost $", "time" }) do head[#head + 1] = c end
  local out = { "| " .. table.concat(head, " | ") .. " |", "|" .. string.rep("---|", #head) }
  for _, r in ipairs(rows) do
    local cells = { r.name, r.status, (r.correct or (r.verified and "yes" or "no")) .. (r.shapes and (" (" .. r.shapes .. ")") or ""),
      f(r.input_ms, "%.4f"), f(r.best_ms, "%.4f") }
    for _, b in ipairs(names) do cells[#cells + 1] = f(r[b .. "_ms"], "%.4f") end
    for _, b in ipairs(names) do cells[#cells + 1] = f(r.speedup[b], "%.2f") end
    for _, c in ipairs({ f(r.speedup.input, "%.2f"), own_share.cell(r), r.rounds and tostring(r.rounds) or "-",
      string.format("%d", r.tokens or 0), string.format("%.4f", r.cost_usd or 0), hms(r.problem_s) }) do
      cells[#cells + 1] = c
    end
    out[#out + 1] = "| " .. table.concat(cells, " | ") .. " |"
  end
  local function sp(name)
    local s = agg.speedup[name]
    if s.n == 0 then return string.format("x %s: no correct problem with this baseline", name) end
    return string.format("x %s: geomean %.3f, mean %.3f (min %.3f, median %.3f, max %.3f; n=%d)",
      name, s.geomean, s.mean, s.min, s.median, s.max, s.n)
  end
  local function fp(b)
    local t = agg.fast_p[b]
    if t["1.0"] == json.null then return string.format("fast_p vs %s: not measured", b) end
    return string.format("fast_1.0 vs %s %.0f%%, fast_1.2 vs %s %.0f%%", b, 100 * t["1.0"], b, 100 * t["1.2"])
  end
  text_section.append(out, own_share.TITLE, own_share.notes(rows, function(r) return r.name end))
  out[#out + 1] = ""
  out[#out + 1] = string.format("correct %d/%d (%.0f%%); finished %d, failed %d; dtype %s; %s",
    agg.correct, agg.problems, 100 * (agg.problems > 0 and agg.correct / agg.problems or 0), agg.finished, agg.failed,
    #agg.dtypes > 0 and table.concat(agg.dtypes, ",") or "-", #agg.devices > 0 and table.concat(agg.devices, ", ") or "-")
  local fps = {}
  for _, b in ipairs(names) do fps[#fps + 1] = fp(b) end
  out[#out + 1] = table.concat(fps, "; ")
  for _, b in ipairs(names) do out[#out + 1] = sp(b) end
  out[#out + 1] = sp("input")
  local tb = agg.attempts_to_best
  if tb and tb.n > 0 then
    out[#out + 1] = string.format("attempts to reach the best: median %s, mean %.1f (min %s, max %s; n=%d)",
      tostring(tb.median), tb.mean, tostring(tb.min), tostring(tb.max), tb.n)
  end
  local rp = agg.replay
  if rp and rp.calls > 0 then
    out[#out + 1] = string.format("LLM calls %d: %d answered from the record/replay cache, %d with no recorded answer, %d sent",
      rp.calls, rp.hits, rp.misses, rp.sent)
  end
  out[#out + 1] = ""
  out[#out + 1] = "| problem | baselines | baselines s | search s | confirmation s | run s |"
  out[#out + 1] = "|---|---|---|---|---|---|"
  local sums = { 0, 0, 0 }
  for _, r in ipairs(rows) do
    local t = r.time_split or {}
    local parts = { t.baselines_s, t.search_s, t.confirm_s }
    local total
    for i, v in ipairs(parts) do
      if v then sums[i] = sums[i] + v; total = (total or 0) + v end
    end
    out[#out + 1] = string.format("| %s | %s | %s | %s | %s | %s |", r.name, r.baselines_source or "-",
      f(parts[1], "%.1f"), f(parts[2], "%.1f"), f(parts[3], "%.1f"), f(total, "%.1f"))
  end
  out[#out + 1] = string.format("| all | | %.1f | %.1f | %.1f | %.1f |", sums[1], sums[2], sums[3],
    sums[1] + sums[2] + sums[3])
  out[#out + 1] = ""
  out[#out + 1] = string.format("tokens %d, cost $%.4f, sweep wall %s, problem time %s, GPU-hours %s",
    agg.tokens, agg.cost_usd, hms(agg.wall_s), hms(agg.problem_s), agg.cpu_mode and "0 (CPU mode)" or string.format("%.3f", agg.gpu_hours))
  -- a failed row says why, so the table alone tells (the whole tail is in sweep.json and the log)
  local failed = {}
  for _, r in ipairs(rows) do
    if type(r.error) == "string" then
      -- "exit N" (or the signal) and the run's last line, its own word on why
      local head, last = r.error:match("^([^:\n]*)"), nil
      for line in (r.error:gsub("^[^:\n]*:%s*", "", 1)):gmatch("[^\n]+") do
        if line:match("%S") then last = line end
      end
      failed[#failed + 1] = string.format("- %s: %s: %s", r.name, head, (last or ""):sub(1, 300))
    end
  end
  text_section.append(out, "Failed runs (the log's last lines: sweep.json `results[i].error`, `logs/<problem>.log`):",
    failed)
  return table.concat(out, "\n")
end

return M
