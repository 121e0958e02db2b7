-- kagent.mem, long-term memory: skills and their record, lessons (full-text search), the archive
-- of verified kernels, and the LLM record/replay cache. Installed into the db object by
-- kagent/mem.lua.
return function(M, Db)
  local x, q, enc, method = M._x, M._q, M._encode, M._method

  local function wall() return require("kagent.time").wall() end

  --- db:register_skill{name, category, intent, source_path} -> true (idempotent upsert)
  Db.register_skill = method("db:register_skill", function(db, t)
    M._check_table("db:register_skill", t)
    M._check_fields("db:register_skill", t,
      { name = true, category = true, intent = true, source_path = true })
    M._require("db:register_skill", t, "name", "string")
    local now = wall()
    x(db, "INSERT INTO skills(name, category, intent, source_path, registered, updated)" ..
      " VALUES (:name, :category, :intent, :source_path, :now, :now)" ..
      " ON CONFLICT(name) DO UPDATE SET category = coalesce(excluded.category, category)," ..
      " intent = coalesce(excluded.intent, intent)," ..
      " source_path = coalesce(excluded.source_path, source_path), updated = excluded.updated",
      { name = t.name, category = t.category, intent = t.intent, source_path = t.source_path, now = now })
    return true
  end)

  --- db:register_skills(skills) -> count. `skills` as loaded from skills/*.lua ({name, category,
  --- intent, path or source_path}); other fields (rules, functions) are ignored. One transaction.
  function Db:register_skills(list)
    if type(list) ~= "table" then error("db:register_skills: expected an array of skills", 2) end
    return self:transaction(function(d)
      for i, s in ipairs(list) do
        if type(s) ~= "table" or type(s.name) ~= "string" then
          error("db:register_skills: item " .. i .. " has no name", 0)
        end
        local ok, err, code = d:register_skill{ name = s.name, category = s.category, intent = s.intent,
          source_path = s.source_path or s.path }
        if not ok then M._fail(err, code) end
      end
      return #list
    end)
  end

  Db.skills = method("db:skills", function(db)
    return q(db, "SELECT name, category, intent, source_path FROM skills ORDER BY name")
  end)

  --- db:record_skill_outcome{skill, bottleneck, op_class, gpu, success, gain, run_id, attempt_id}
  Db.record_skill_outcome = method("db:record_skill_outcome", function(db, t)
    M._check_table("db:record_skill_outcome", t)
    M._check_fields("db:record_skill_outcome", t, { skill = true, bottleneck = true,
      op_class = true, gpu = true, success = true, gain = true, run_id = true, attempt_id = true })
    M._require("db:record_skill_outcome", t, "skill", "string")
    M._require("db:record_skill_outcome", t, "success", "boolean")
    local now = wall()
    x(db, "INSERT INTO skills(name, registered, updated) VALUES (?, ?, ?)" ..
      " ON CONFLICT(name) DO NOTHING", { t.skill, now, now })
    local _, id = x(db, "INSERT INTO skill_outcomes(skill, bottleneck, op_class, gpu, success," ..
      " gain, run_id, attempt_id, created, uid) VALUES (:skill, :bottleneck, :op_class, :gpu," ..
      " :success, :gain, :run_id, :attempt_id, :created, " .. M._NEW_UID .. ")", {
        skill = t.skill, bottleneck = t.bottleneck, op_class = t.op_class, gpu = t.gpu,
        success = t.success, gain = t.gain, run_id = t.run_id, attempt_id = t.attempt_id,
        created = now,
      })
    return id
  end)

  local function median(xs)
    local n = #xs
    if n == 0 then return nil end
    table.sort(xs)
    if n % 2 == 1 then return xs[(n + 1) / 2] end
    return (xs[n / 2] + xs[n / 2 + 1]) / 2
  end

  --- db:skill_stats{skill, bottleneck, op_class, gpu} -> {{skill, attempts, successes,
  --- success_rate, median_gain}}, best first
  Db.skill_stats = method("db:skill_stats", function(db, t)
    t = t or {}
    M._check_fields("db:skill_stats", t, { skill = true, bottleneck = true, op_class = true, gpu = true })
    -- SQLite has no median: fetch the (skill, success, gain) triples and fold them here.
    local rows = q(db, "SELECT skill, success, gain FROM skill_outcomes WHERE 1" ..
      M._filters(t, { "skill", "bottleneck", "op_class", "gpu" }), t)
    local by, order = {}, {}
    for _, r in ipairs(rows) do
      local s = by[r.skill]
      if not s then
        s = { skill = r.skill, attempts = 0, successes = 0, gains = {} }
        by[r.skill] = s
        order[#order + 1] = s
      end
      s.attempts = s.attempts + 1
      if r.success == 1 then s.successes = s.successes + 1 end
      if r.gain then s.gains[#s.gains + 1] = r.gain end
    end
    for _, s in ipairs(order) do
      s.success_rate = s.successes / s.attempts
      s.median_gain = median(s.gains)
      s.gains = nil
    end
    table.sort(order, function(a, b)
      if a.success_rate ~= b.success_rate then return a.success_rate > b.success_rate end
      local ga, gb = a.median_gain or -math.huge, b.median_gain or -math.huge
      if ga ~= gb then return ga > gb end
      return a.skill < b.skill
    end)
    return order
  end)

  --- db:add_lesson{text, tags, problem_hash, gpu, source_attempt} -> lesson_id
  Db.add_lesson = method("db:add_lesson", function(db, t)
    M._check_table("db:add_lesson", t)
    M._check_fields("db:add_lesson", t,
      { text = true, tags = true, problem_hash = true, gpu = true, source_attempt = true })
    M._require("db:add_lesson", t, "text", "string")
    local _, id = x(db, "INSERT INTO lessons(text, tags, problem_hash, gpu, source_attempt, created, uid)" ..
      " VALUES (:text, :tags, :problem_hash, :gpu, :source_attempt, :created, " .. M._NEW_UID .. ")", {
        text = t.text, tags = enc(t.tags), problem_hash = t.problem_hash, gpu = t.gpu,
        source_attempt = t.source_attempt, created = wall(),
      })
    return id
  end)

  -- Free text to an FTS5 query: each word quoted (so punctuation and FTS operators in the text
  -- cannot break the syntax), joined with OR; BM25 ranks lessons that match more words first.
  local function fts_query(text)
    local words = {}
    for w in text:gmatch("[%w_\128-\255]+") do words[#words + 1] = '"' .. w .. '"' end
    return table.concat(words, " OR ")
  end
  M._fts_query = fts_query

  --- db:search_lessons(query, {limit = 10, problem_hash, gpu}) -> lessons, best first
  Db.search_lessons = method("db:search_lessons", function(db, query, opts)
    if type(query) ~= "string" then error("db:search_lessons: query must be a string", 3) end
    opts = opts or {}
    local match = fts_query(query)
    local p = { match = match, limit = opts.limit or 10, problem_hash = opts.problem_hash, gpu = opts.gpu }
    local rows
    if match == "" then
      rows = q(db, "SELECT * FROM lessons WHERE 1" .. M._filters(p, { "problem_hash", "gpu" }) ..
        " ORDER BY id DESC LIMIT :limit", p)
    else
      rows = q(db, "SELECT l.*, -bm25(lessons_fts) AS score FROM lessons_fts" ..
        " JOIN lessons l ON l.id = lessons_fts.rowid WHERE lessons_fts MATCH :match" ..
        M._filters(p, { "problem_hash", "gpu" }, { problem_hash = "l.problem_hash", gpu = "l.gpu" }) ..
        " ORDER BY bm25(lessons_fts), l.id DESC LIMIT :limit", p)
    end
    return M.decode_rows(rows)
  end)

  --- db:lessons{problem_hash, gpu, limit = 50} -> newest first
  Db.lessons = method("db:lessons", function(db, t)
    t = t or {}
    local p = { problem_hash = t.problem_hash, gpu = t.gpu, limit = t.limit or 50 }
    return M.decode_rows(q(db, "SELECT * FROM lessons WHERE 1" ..
      M._filters(p, { "problem_hash", "gpu" }) .. " ORDER BY id DESC LIMIT :limit", p))
  end)

  --- db:archive_kernel{problem_hash, gpu, dtype, source, time_ms, ...} -> archive id
  Db.archive_kernel = method("db:archive_kernel", function(db, t)
    M._check_table("db:archive_kernel", t)
    M._check_fields("db:archive_kernel", t, { problem_hash = true, gpu = true, dtype = true,
      source = true, source_hash = true, time_ms = true, speedup_vs_eager = true,
      speedup_vs_compile = true, metrics = true, run_id = true, attempt_id = true })
    M._require("db:archive_kernel", t, "problem_hash", "string")
    M._require("db:archive_kernel", t, "gpu", "string")
    M._require("db:archive_kernel", t, "source", "string")
    M._require("db:archive_kernel", t, "time_ms", "number")
    local p = {}
    for k, v in pairs(t) do p[k] = v end
    p.dtype = t.dtype or "fp32"
    p.metrics = enc(t.metrics)
    p.created = wall()
    local _, id = x(db, "INSERT INTO archive(problem_hash, gpu, dtype, source, source_hash, time_ms," ..
      " speedup_vs_eager, speedup_vs_compile, metrics, run_id, attempt_id, created, uid) VALUES" ..
      " (:problem_hash, :gpu, :dtype, :source, :source_hash, :time_ms, :speedup_vs_eager," ..
      " :speedup_vs_compile, :metrics, :run_id, :attempt_id, :created, " .. M._NEW_UID .. ")", p)
    return id
  end)

  --- db:best_archived{problem_hash, gpu, dtype = "fp32"} -> fastest archived kernel or nil
  Db.best_archived = method("db:best_archived", function(db, t)
    M._check_table("db:best_archived", t)
    M._require("db:best_archived", t, "problem_hash", "string")
    local p = { problem_hash = t.problem_hash, gpu = t.gpu, dtype = t.dtype or "fp32" }
    return q(db, "SELECT * FROM archive WHERE problem_hash = :problem_hash AND dtype = :dtype" ..
      M._filters(p, { "gpu" }) .. " ORDER BY time_ms, id LIMIT 1", p)[1]
  end)

  --- db:cache_get(key) -> response, request, created | nil
  Db.cache_get = method("db:cache_get", function(db, key)
    if type(key) ~= "string" then error("db:cache_get: key must be a string", 3) end
    local r = q(db, "SELECT request, response, created FROM llm_cache WHERE key = ?", { key })[1]
    if not r then return nil end
    return r.response, r.request, r.created
  end)

  --- db:cache_put(key, request, response) -> true
  Db.cache_put = method("db:cache_put", function(db, key, request, response)
    if type(key) ~= "string" then error("db:cache_put: key must be a string", 3) end
    if type(response) ~= "string" then error("db:cache_put: response must be a string", 3) end
    x(db, "INSERT OR REPLACE INTO llm_cache(key, request, response, created) VALUES (?, ?, ?, ?)",
      { key, enc(request) or require("kagent.json").null, response, wall() })
    return true
  end)

  --- db:measurement_get(kind, key) -> value (decoded JSON), created | nil
  Db.measurement_get = method("db:measurement_get", function(db, kind, key)
    if type(kind) ~= "string" or type(key) ~= "string" then
      error("db:measurement_get: kind and key must be strings", 3)
    end
    local r = q(db, "SELECT value, created FROM measurements WHERE kind = ? AND key = ?", { kind, key })[1]
    if not r then return nil end
    return require("kagent.json").decode(r.value), r.created
  end)

  --- db:measurement_put(kind, key, value) -> true (replaces the row of that kind and key)
  Db.measurement_put = method("db:measurement_put", function(db, kind, key, value)
    if type(kind) ~= "string" or type(key) ~= "string" then
      error("db:measurement_put: kind and key must be strings", 3)
    end
    if type(value) ~= "table" then error("db:measurement_put: value must be a table", 3) end
    x(db, "INSERT OR REPLACE INTO measurements(kind, key, value, created) VALUES (?, ?, ?, ?)",
      { kind, key, enc(value), wall() })
    return true
  end)
end
