-- What a sweep shows: a status line while it runs (problems done, each running problem's round
-- and best speedup, Slurm's queue), and at the end sweep.json's results and the table.
local fs = require("kagent.fs")
local json = require("kagent.json")
local ktime = require("kagent.time")
local plan_lib = require("agents.tools.sweep.plan")
local task_lib = require("agents.tools.sweep.task")
local figures = require("agents.tools.sweep.figures")

local M = {}

-- The last progress line of a running problem's log: "round 3/8 1.52x eager".
function M.run_progress(plan, p)
  local text = fs.read(plan_lib.log_path(plan, p)) or ""
  -- only the current launch: its lines follow the last launch marker
  local from = 1
  for pos in text:gmatch("()== %d%d%d%d%-") do from = pos end
  local last
  for line in text:sub(from):gmatch("%[round [^\n]*") do last = line end
  if not last then return nil end
  local round = last:match("^%[round (%d+/%d+)%]")
  local x = last:match("(%d+%.%d+x eager)")
  return "round " .. (round or "?") .. (x and (" " .. x) or "")
end

-- counts(plan) -> problems whose run finished, and those whose last launch failed
function M.counts(plan)
  local done, failed = 0, 0
  for _, p in ipairs(plan.problems) do
    if task_lib.run_state(plan, p).done then done = done + 1
    else
      local rec = task_lib.read_record(plan, p)
      if rec and rec.status == "failed" then failed = failed + 1 end
    end
  end
  return done, failed
end

-- A status line on stderr: rewritten in place on a terminal; in a log, printed when it changes
-- (the clock aside).
local Line = {}
Line.__index = Line

function M.line()
  local tty = fs.isatty(2) and os.getenv("TERM") ~= "dumb" and os.getenv("KAGENT_PROGRESS") ~= "lines"
  return setmetatable({ tty = tty, last = nil, t0 = ktime.now() }, Line)
end

function Line:show(text)
  if self.tty then
    io.stderr:write("\r\27[K" .. text .. " | " .. figures.hms(ktime.now() - self.t0))
  elseif text ~= self.last then
    io.stderr:write(text .. " | " .. figures.hms(ktime.now() - self.t0) .. "\n")
  end
  self.last = text
  io.stderr:flush()
end

-- say(message): a line of its own (a resubmission, a warning), not overwritten by the status
function Line:say(msg)
  if self.tty then io.stderr:write("\r\27[K") end
  io.stderr:write(msg .. "\n")
  if self.tty and self.last then self:show(self.last) end
  io.stderr:flush()
end

function Line:finish()
  if self.tty then io.stderr:write("\n") end
end

-- status_text(plan, running, queue_text) -> the status line's text: problems done and failed,
-- and each running problem (entries of plan.problems) with its round and best speedup (from its
-- log); queue_text: Slurm's view.
function M.status_text(plan, running, queue_text)
  local done, failed = M.counts(plan)
  local parts = {}
  for _, p in ipairs(running) do
    local prog = M.run_progress(plan, p)
    parts[#parts + 1] = p.name .. (prog and (" " .. prog) or "")
  end
  local s = string.format("[sweep] done %d/%d, failed %d, running %d", done, #plan.problems, failed, #running)
  if #parts > 0 then s = s .. ": " .. table.concat(parts, ", ") end
  if queue_text then s = s .. " | " .. queue_text end
  return s
end

-- results(plan) -> rows, aggregate; also written into sweep.json and table.md
function M.results(plan, extra)
  local rows = {}
  -- a packed sweep (agents/tools/sweep/pack.lua) has no task records: a finished problem's time
  -- comes from the row sweep.json kept for it
  local before = {}
  for _, r in ipairs(type(plan.results) == "table" and plan.results or {}) do before[r.name] = r end
  for i, p in ipairs(plan.problems) do
    local rec = task_lib.read_record(plan, p)
    local st = task_lib.run_state(plan, p)
    local summary = st.done and json.decode(fs.read(fs.join(st.done, "summary.json")) or "null")
    -- the run folder decides: a run with a summary is finished whatever its last launch said
    if st.done then
      rec = rec or { launches = {} }
      rec.status = "done"
    end
    local packed = st.done and not task_lib.read_record(plan, p) and before[p.name]
    rows[i] = figures.row(p, type(summary) == "table" and summary or nil, rec)
    if packed then rows[i].problem_s, rows[i].gpu_hours = packed.problem_s, packed.gpu_hours end
    rows[i].run_dir = st.done or st.resume or json.null
    rows[i].run_uid = rec and rec.run_uid or json.null
    rows[i].log = plan_lib.log_path(plan, p)
  end
  local agg = figures.aggregate(rows, extra)
  return rows, agg
end

function M.write(plan, rows, agg)
  plan.results, plan.aggregate, plan.definitions = rows, agg, figures.DEFINITIONS
  local text = figures.table_text(rows, agg)
  if plan.policy == "fuse" then
    -- Levels 2 and 3: the fuse table (route, subgraphs, first program) before the common lines
    local fuse_rows = require("agents.tools.sweep.fuse_rows")
    local fagg = fuse_rows.aggregate(rows)
    plan.fuse_aggregate, plan.fuse_definitions = fagg, fuse_rows.DEFINITIONS
    text = fuse_rows.table_text(rows, fagg) .. "\n\n" .. text
  end
  if plan.kernelbench then
    -- KernelBench: the table papers print, per level, above the rest
    local levels = require("agents.tools.sweep.levels")
    local lagg = levels.aggregate(rows)
    plan.levels_aggregate, plan.levels_definitions = lagg, levels.DEFINITIONS
    text = levels.table_text(rows, lagg, agg.cpu_mode) .. "\n\n" .. text
  end
  -- each file is replaced whole (kagent.fs.write); table.md first, so a sweep.json that counts a
  -- problem finished always has a table.md that shows it
  fs.write(fs.join(plan.dir, "table.md"), text .. "\n")
  plan_lib.save(plan)
  local ok, err = pcall(require("agents.tools.report").sweep_index, plan.dir)
  if not ok then require("kagent.log").warn("sweep index.html: %s", tostring(err)) end
  return text
end

return M
