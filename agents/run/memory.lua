-- The agents' view of kagent.mem: records attempts, reflexions, skill outcomes, lessons and
-- archived kernels, and renders history and lessons for prompts. One place that knows the
-- schema's field names, so roles stay about policy.
local json = require("kagent.json")

local M = {}
M.__index = M

-- The SQL condition on an attempt `c` that is evidence about a kernel: not ended by an LLM
-- failure, not of a round redone after the run was interrupted. Memory keeps those for the
-- record; no query below learns from them.
M.EVIDENCE = "COALESCE(c.stage, '') NOT IN ('llm_error', 'superseded')"

-- adopt_legacy_hashes(db, problem_code) -> rows rewritten. Rows written before fingerprints became
-- SHA-256 (agents/lib/fingerprint_legacy.lua) carry the old 16-digit hash of their problem; they
-- take the new one when a run of that problem opens the database, so what earlier runs learned
-- (lessons, archived kernels, past fuse routes) is still found. A hash cannot be inverted, so the
-- rows of a problem are rewritten when its code is at hand, which is when they are next read.
function M.adopt_legacy_hashes(db, problem_code)
  local old = require("agents.lib.fingerprint_legacy").hash(problem_code)
  local new = require("agents.lib.fingerprint").hash(problem_code)
  return db:transaction(function(d)
    local n = 0
    for _, t in ipairs({ "runs", "lessons", "archive" }) do
      n = n + d:exec("UPDATE " .. t .. " SET problem_hash = ? WHERE problem_hash = ?", { new, old })
    end
    return n
  end)
end

-- rekey_op_class(db, problem_hash, op_class) -> rows rewritten. Rows of earlier runs of this
-- problem filed under another op class (guessed from the source's words before the class came
-- from the problem's FX trace: agents/lib/features.lua) take the run's, so what they learned is
-- found under the class this run reads: skill outcomes of its runs, its lessons' "op_" tag.
function M.rekey_op_class(db, problem_hash, op_class)
  local tag = '"op_' .. op_class .. '"'
  return db:transaction(function(d)
    local n = d:exec("UPDATE skill_outcomes SET op_class = ? WHERE COALESCE(op_class, '') != ? AND run_id IN "
      .. "(SELECT id FROM runs WHERE problem_hash = ?)", { op_class, op_class, problem_hash })
    local rows = d:query("SELECT id, tags FROM lessons WHERE problem_hash = ? AND tags LIKE '%\"op!_%' ESCAPE '!'",
      { problem_hash }) or {}
    for _, r in ipairs(rows) do
      local tags = r.tags:gsub('"op_[%w_]+"', tag)
      if tags ~= r.tags then n = n + d:exec("UPDATE lessons SET tags = ? WHERE id = ?", { tags, r.id }) end
    end
    return n
  end)
end

-- check(self, v, err) -> v. A write that failed (a full disk; a database locked past kagent.mem's
-- bound) is recorded in the run's writes, which stop the run: a row lost is no complete record.
local function check(self, v, err)
  if v == nil and err then self:failed(err) end
  return v
end

-- failed(err): a write of this memory's database that failed (here, or through run.db elsewhere)
function M:failed(err)
  local ok, path = pcall(self.db.path, self.db)
  self.writes:failed("the memory database " .. (ok and tostring(path) or "?"), err)
end

-- open(db, {problem, problem_hash, gpu, policy, config}, writes) -> memory (starts a run row), or
-- nil, err. writes: the run's record of failed writes (agents/run/writes.lua; the run folder's,
-- rd.writes), where every failed write of this memory goes; a new one when nil.
function M.open(db, info, writes)
  local self = setmetatable({ db = db, info = info, writes = writes or require("agents.run.writes").new() }, M)
  local id, err = db:start_run({ problem = info.problem, problem_hash = info.problem_hash, gpu = info.gpu,
    policy = info.policy, config = info.config })
  if not id then return nil, err end
  self.run_id = id
  return self
end

-- resume(db, run_id, info, writes) -> memory on an existing run row, which is running again; or
-- nil, err (writes: as for open)
function M.resume(db, run_id, info, writes)
  local row = db:get_run(run_id)
  if not row then return nil, "run " .. tostring(run_id) .. " of state.json is not in " .. db:path() end
  local ok, err = db:exec("UPDATE runs SET status = 'running', finished = NULL WHERE id = ?", { run_id })
  if not ok then return nil, err end
  return setmetatable({ db = db, info = info, run_id = run_id, writes = writes or require("agents.run.writes").new() }, M)
end

-- supersede(after_round, moved) -> number of attempts marked: the run's attempts of rounds after
-- `after_round` (all of them, the input's included, when it is nil) were made by a process that
-- did not finish their round; the round is redone, so they become stage 'superseded' and what
-- was learned from them (skill outcomes, lessons) is removed: the redone round records its own.
-- moved = {from = folder, to = folder}: their trace files moved there (paths rewritten).
function M:supersede(after_round, moved)
  local where = "run_id = :run AND round > :after AND stage != 'superseded'"
  local p = { run = self.run_id, after = after_round or -1 }
  return check(self, self.db:transaction(function(db)
    local ids = db:query("SELECT id FROM attempts WHERE " .. where, p)
    if #ids == 0 then return 0 end
    local sub = "SELECT id FROM attempts WHERE " .. where
    db:exec("DELETE FROM skill_outcomes WHERE attempt_id IN (" .. sub .. ")", p)
    db:exec("DELETE FROM lessons WHERE source_attempt IN (" .. sub .. ")", p)
    if moved then
      p.from, p.to = moved.from, moved.to
      for _, col in ipairs({ "prompt_path", "reply_path", "source_path" }) do
        db:exec("UPDATE attempts SET " .. col .. " = :to || substr(" .. col .. ", length(:from) + 1) WHERE "
          .. where .. " AND substr(" .. col .. ", 1, length(:from)) = :from", p)
      end
    end
    db:exec("UPDATE attempts SET stage = 'superseded' WHERE " .. where, p)
    return #ids
  end))
end

-- add_attempt(fields) -> attempt_id (run_id filled in)
function M:add_attempt(f)
  f.run_id = self.run_id
  return check(self, self.db:add_attempt(f))
end

function M:update_attempt(id, f)
  if id then return check(self, self.db:update_attempt(id, f)) end
end

function M:add_reflexion(attempt_id, r, text)
  if not attempt_id then return nil end
  local function arr(v) return type(v) == "table" and v or json.empty_array end
  local dc, fe = r.was_diagnosis_correct, r.was_fix_effective
  return check(self, self.db:add_reflexion({ attempt_id = attempt_id,
    diagnosis_correct = type(dc) == "boolean" and dc or nil,
    fix_effective = type(fe) == "boolean" and fe or nil,
    lessons = arr(r.lessons), avoid = arr(r.avoid_patterns), try = arr(r.try_patterns), text = text }))
end

function M:skill_outcome(skill, f)
  if not skill then return end
  f.skill = skill
  f.gpu = self.info.gpu
  f.run_id = self.run_id
  return check(self, self.db:record_skill_outcome(f))
end

-- skill_stats{op_class, bottleneck} -> {name = {attempts, successes, median_gain}} on this GPU:
-- the learned record retrieval ranks by (agents/lib/skills.lua, rank)
function M:skill_stats(f)
  f = f or {}
  local rows = self.db:skill_stats({ op_class = f.op_class, bottleneck = f.bottleneck, gpu = self.info.gpu }) or {}
  local out = {}
  for _, r in ipairs(rows) do
    out[r.skill] = { attempts = r.attempts, successes = r.successes, median_gain = r.median_gain }
  end
  return out
end

-- skill_table(db, {gpu, op_class, bottleneck}) -> the learned table: one row per (skill,
-- bottleneck class, op class, GPU) with attempts, successes, success_rate, median_gain, best
-- first within each class (outcomes recorded without a class are left out)
function M.skill_table(db, f)
  f = f or {}
  local where, params = { "bottleneck IS NOT NULL", "op_class IS NOT NULL", "gpu IS NOT NULL" }, {}
  for _, k in ipairs({ "gpu", "op_class", "bottleneck" }) do
    if f[k] then where[#where + 1] = k .. " = :" .. k; params[k] = f[k] end
  end
  local groups = db:query("SELECT DISTINCT gpu, op_class, bottleneck FROM skill_outcomes WHERE "
    .. table.concat(where, " AND ") .. " ORDER BY gpu, op_class, bottleneck", params) or {}
  local out = {}
  for _, g in ipairs(groups) do
    for _, r in ipairs(db:skill_stats({ gpu = g.gpu, op_class = g.op_class, bottleneck = g.bottleneck }) or {}) do
      r.gpu, r.op_class, r.bottleneck = g.gpu, g.op_class, g.bottleneck
      out[#out + 1] = r
    end
  end
  return out
end

local function plan_attempt(self, parent_fp, skill, signature, only_improved)
  if not parent_fp then return nil end
  local rows = self.db:query("SELECT c.id, c.run_id, c.round, c.worker, c.stage, c.time_ms FROM attempts c"
    .. " JOIN attempts p ON c.parent_id = p.id JOIN runs r ON c.run_id = r.id"
    .. " WHERE p.fingerprint = :fp AND c.skill = :skill AND c.plan_signature = :sig AND r.gpu = :gpu"
    .. " AND c.role != 'repair' AND " .. M.EVIDENCE .. (only_improved and " AND c.stage = 'improved'" or "")
    .. " ORDER BY c.id LIMIT 1",
    { fp = parent_fp, skill = skill or "", sig = signature, gpu = self.info.gpu }) or {}
  return rows[1]
end

-- plan_tried(parent_fingerprint, skill, signature) -> the earliest attempt (any run on this GPU)
-- that applied this plan to a kernel with this fingerprint, or nil. The hard de-duplication of
-- plans: memory decides, not the wording of a prompt.
function M:plan_tried(parent_fp, skill, signature)
  return plan_attempt(self, parent_fp, skill, signature, false)
end

-- plan_improved(parent_fingerprint, skill, signature) -> the earliest such attempt whose kernel
-- passed the promotion gate over that parent (stage "improved"), or nil
function M:plan_improved(parent_fp, skill, signature)
  return plan_attempt(self, parent_fp, skill, signature, true)
end

-- skills_tried(parent_fingerprint) -> {skill = true} for every skill applied to this kernel
-- before (any run on this GPU)
function M:skills_tried(parent_fp)
  local out = {}
  if not parent_fp then return out end
  for _, r in ipairs(self.db:query("SELECT DISTINCT c.skill FROM attempts c JOIN attempts p ON c.parent_id = p.id"
    .. " JOIN runs r ON c.run_id = r.id WHERE p.fingerprint = :fp AND r.gpu = :gpu AND c.role != 'repair'"
    .. " AND " .. M.EVIDENCE .. " AND c.skill IS NOT NULL", { fp = parent_fp, gpu = self.info.gpu }) or {}) do
    out[r.skill] = true
  end
  return out
end

function M:add_lesson(text, tags, attempt_id)
  if type(text) ~= "string" or text == "" then return end
  return check(self, self.db:add_lesson({ text = text, tags = tags or json.empty_array,
    problem_hash = self.info.problem_hash, gpu = self.info.gpu, source_attempt = attempt_id }))
end

-- repairs_text(attempt_id) -> the repair chain stored under an attempt, on one line
function M:repairs_text(id)
  local rows = self.db:attempts_from(id, {}) or {}
  local out = {}
  for _, r in ipairs(rows) do
    if r.role == "repair" then
      local diag = tostring(r.plan_signature or ""):match("^repair %d+: (.+)$")
      out[#out + 1] = string.format("%s%s%s", tostring(r.stage), r.error_signature and (" " .. r.error_signature) or "",
        diag and (" [" .. diag .. "]") or "")
    end
  end
  if #out == 0 then return nil end
  return "repairs: " .. table.concat(out, " -> ")
end

-- The order of prompts' lists of attempts and lessons: by run, round and worker (newest first),
-- not by when a row was written. Workers of a round finish in any order; a prompt that listed
-- them as they finished would differ from run to run, and a replayed run would not find it.
local SEARCH_ORDER = "c.run_id DESC, c.round DESC, CAST(c.worker AS INTEGER) DESC, c.id DESC"

-- history_text(parent_fingerprint) -> what was tried from this kernel (any run on this GPU,
-- newest first): skill, plan signature, outcome, time or error, the repair chain and the
-- reflexion's lessons; or a sentence saying nothing was.
function M:history_text(parent_fp, limit)
  local rows = parent_fp and self.db:query("SELECT c.* FROM attempts c JOIN attempts p ON c.parent_id = p.id"
    .. " JOIN runs r ON c.run_id = r.id WHERE p.fingerprint = :fp AND r.gpu = :gpu AND c.role != 'repair'"
    .. " AND " .. M.EVIDENCE .. " ORDER BY " .. SEARCH_ORDER .. " LIMIT :limit",
    { fp = parent_fp, gpu = self.info.gpu, limit = limit or 10 }) or {}
  local out = {}
  for _, a in ipairs(rows) do
    local line = string.format("- %sround %s w%s, skill %s (plan %s): %s%s",
      a.run_id ~= self.run_id and ("earlier run " .. tostring(a.run_id) .. ", ") or "", tostring(a.round or "?"),
      tostring(a.worker or "?"), tostring(a.skill or "-"), tostring(a.plan_signature or "-"), tostring(a.stage or "?"),
      a.time_ms and string.format(", %.4f ms", a.time_ms) or (a.error_signature and (" (" .. a.error_signature .. ")") or ""))
    local rep = self:repairs_text(a.id)
    if rep then line = line .. "; " .. rep end
    local r = (self.db:query("SELECT lessons FROM reflexions WHERE attempt_id = ? ORDER BY id DESC LIMIT 1", { a.id }) or {})[1]
    local lessons = r and json.decode(r.lessons or "")
    if type(lessons) == "table" and #lessons > 0 then line = line .. "; lesson: " .. table.concat(lessons, " / ") end
    out[#out + 1] = line
  end
  if #out == 0 then return "(nothing tried from this kernel yet)" end
  return table.concat(out, "\n")
end

-- lessons_for{op_class, bottleneck, limit} -> verified lessons from any problem of this op class
-- (and bottleneck class, when given), this GPU's first, newest first
function M:lessons_for(f)
  local like = { op = '%"op_' .. tostring(f.op_class) .. '"%' }
  local sql = "SELECT l.id, l.text, l.gpu FROM lessons l LEFT JOIN attempts c ON c.id = l.source_attempt"
    .. " WHERE l.tags LIKE :op AND l.tags LIKE '%\"verified\"%'"
  if f.bottleneck then
    sql = sql .. " AND l.tags LIKE :bn"
    like.bn = '%"bn_' .. tostring(f.bottleneck) .. '"%'
  end
  like.gpu, like.limit = self.info.gpu, f.limit or 6
  return self.db:query(sql .. " ORDER BY (l.gpu = :gpu) DESC, " .. SEARCH_ORDER .. ", l.id LIMIT :limit", like) or {}
end

-- lessons_text{op_class, bottleneck, query, limit} -> verified lessons of similar problems (same
-- op class and bottleneck class), then lessons of this problem matching the query words
function M:lessons_text(f)
  local limit = f.limit or 8
  local out, seen = {}, {}
  local function add(text)
    if #out < limit and text and not seen[text] then seen[text] = true; out[#out + 1] = "- " .. tostring(text) end
  end
  for _, l in ipairs(self:lessons_for({ op_class = f.op_class, bottleneck = f.bottleneck, limit = limit })) do add(l.text) end
  -- best matches first; among equal scores by text, not by when each lesson was written
  local found = self.db:search_lessons(f.query or "", { limit = 3 * limit, problem_hash = self.info.problem_hash }) or {}
  table.sort(found, function(a, b)
    if (a.score or 0) ~= (b.score or 0) then return (a.score or 0) > (b.score or 0) end
    return tostring(a.text) < tostring(b.text)
  end)
  for _, l in ipairs(found) do add(l.text) end
  if #out == 0 then return "(no lessons recorded yet)" end
  return table.concat(out, "\n")
end

function M:archive(k, dtype)
  local t = k.result and k.result.time_ms
  if not (t and t.median) then return end
  return check(self, self.db:archive_kernel({ problem_hash = self.info.problem_hash, gpu = self.info.gpu,
    dtype = dtype, source = k.code, time_ms = t.median, speedup_vs_eager = k.result.speedup_vs_eager,
    speedup_vs_compile = k.result.speedup_vs_compile, run_id = self.run_id, attempt_id = k.attempt_id }))
end

function M:best_archived(dtype)
  return self.db:best_archived({ problem_hash = self.info.problem_hash, gpu = self.info.gpu, dtype = dtype })
end

function M:finish(status, summary)
  return check(self, self.db:finish_run(self.run_id, status, summary))
end

return M
