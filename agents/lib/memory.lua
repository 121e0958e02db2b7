-- The agents' view of kagent.mem: records attempts, reflexions, skill outcomes, lessons and
-- archived kernels, and renders history and lessons for prompts. One place that knows the
-- schema's field names, so roles stay about policy.
local json = require("kagent.json")
local log = require("kagent.log")

local M = {}
M.__index = M

-- open(db, {problem, problem_hash, gpu, policy, config}) -> memory (starts a run row)
function M.open(db, info)
  local self = setmetatable({ db = db, info = info }, M)
  self.run_id = db:start_run({ problem = info.problem, problem_hash = info.problem_hash, gpu = info.gpu,
    policy = info.policy, config = info.config })
  return self
end

-- resume(db, run_id, info) -> memory on an existing run row
function M.resume(db, run_id, info)
  return setmetatable({ db = db, info = info, run_id = run_id }, M)
end

local function check(v, err, what)
  if v == nil and err then log.warn("memory: %s failed: %s", what, tostring(err)) end
  return v
end

-- add_attempt(fields) -> attempt_id (run_id filled in)
function M:add_attempt(f)
  f.run_id = self.run_id
  return check(self.db:add_attempt(f))
end

function M:update_attempt(id, f)
  if id then return check(self.db:update_attempt(id, f)) end
end

function M:add_reflexion(attempt_id, r, text)
  if not attempt_id then return nil end
  local function arr(v) return type(v) == "table" and v or json.empty_array end
  local dc, fe = r.was_diagnosis_correct, r.was_fix_effective
  return check(self.db:add_reflexion({ attempt_id = attempt_id,
    diagnosis_correct = type(dc) == "boolean" and dc or nil,
    fix_effective = type(fe) == "boolean" and fe or nil,
    lessons = arr(r.lessons), avoid = arr(r.avoid_patterns), try = arr(r.try_patterns), text = text }))
end

function M:skill_outcome(skill, f)
  if not skill then return end
  f.skill = skill
  f.gpu = self.info.gpu
  f.run_id = self.run_id
  return check(self.db:record_skill_outcome(f))
end

-- skill_stats(op_class) -> {name = {attempts, successes}} for retrieval ranking
function M:skill_stats(op_class)
  local rows = self.db:skill_stats({ op_class = op_class, gpu = self.info.gpu }) or {}
  local out = {}
  for _, r in ipairs(rows) do out[r.skill] = { attempts = r.attempts, successes = r.successes } end
  return out
end

function M:add_lesson(text, tags, attempt_id)
  if type(text) ~= "string" or text == "" then return end
  return check(self.db:add_lesson({ text = text, tags = tags or json.empty_array,
    problem_hash = self.info.problem_hash, gpu = self.info.gpu, source_attempt = attempt_id }))
end

-- history_text(parent_attempt_id) -> what was tried from this parent, with outcomes and
-- reflexion lessons (newest first), or a sentence saying nothing was.
function M:history_text(parent_id, limit)
  local rows = self.db:history(self.run_id, { parent_id = parent_id, limit = limit or 10 }) or {}
  local out = {}
  for _, a in ipairs(rows) do
    if a.role ~= "input" then
      local line = string.format("- round %s w%s, skill %s: %s%s", tostring(a.round or "?"), tostring(a.worker or "?"),
        tostring(a.skill or "-"), tostring(a.stage or "?"),
        a.time_ms and string.format(", %.4f ms", a.time_ms) or (a.error_signature and (" (" .. a.error_signature .. ")") or ""))
      local r = a.reflexion
      if type(r) == "table" and type(r.lessons) == "table" and #r.lessons > 0 then
        line = line .. "; lesson: " .. table.concat(r.lessons, " / ")
      end
      out[#out + 1] = line
    end
  end
  if #out == 0 then return "(nothing tried from this kernel yet)" end
  return table.concat(out, "\n")
end

-- lessons_text(query) -> lessons from earlier runs on this problem/GPU matching the query
function M:lessons_text(query, limit)
  local rows = self.db:search_lessons(query or "", { limit = limit or 8, problem_hash = self.info.problem_hash }) or {}
  if #rows == 0 then rows = self.db:search_lessons(query or "", { limit = limit or 5 }) or {} end
  local out = {}
  for _, l in ipairs(rows) do out[#out + 1] = "- " .. tostring(l.text) end
  if #out == 0 then return "(no lessons recorded yet)" end
  return table.concat(out, "\n")
end

function M:archive(k, dtype)
  local t = k.result and k.result.time_ms
  if not (t and t.median) then return end
  return check(self.db:archive_kernel({ problem_hash = self.info.problem_hash, gpu = self.info.gpu,
    dtype = dtype, source = k.code, time_ms = t.median, speedup_vs_eager = k.result.speedup_vs_eager,
    speedup_vs_compile = k.result.speedup_vs_compile, run_id = self.run_id, attempt_id = k.attempt_id }))
end

function M:best_archived(dtype)
  return self.db:best_archived({ problem_hash = self.info.problem_hash, gpu = self.info.gpu, dtype = dtype })
end

function M:finish(status, summary)
  return check(self.db:finish_run(self.run_id, status, summary))
end

return M
