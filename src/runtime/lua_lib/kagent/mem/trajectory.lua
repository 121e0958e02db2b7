-- kagent.mem, short-term memory: one run's rounds, attempts and reflexions, and the questions
-- search policies ask of them (what was tried from this parent, is this kernel a duplicate,
-- what is the best so far). Installed into the db object by kagent/mem.lua.
local json = require("kagent.json")

return function(M, Db)
  local x, q, enc, method = M._x, M._q, M._encode, M._method
  local bools, decode = M._booleans, M.decode

  local ATTEMPT_FIELDS = {
    "run_id", "round", "parent_id", "worker", "role", "strategy", "skill", "plan_signature",
    "prompt_path", "reply_path", "source_path", "source_hash", "fingerprint", "stage",
    "error_signature", "correct", "time_ms", "speedup_vs_eager", "speedup_vs_compile", "metrics",
  }
  local ATTEMPT_ALLOWED = {}
  for _, f in ipairs(ATTEMPT_FIELDS) do ATTEMPT_ALLOWED[f] = true end

  local function wall() return require("kagent.time").wall() end

  local function one(rows) return rows[1] end

  local function attempt_row(r)
    return bools(r)
  end

  local function attempt_rows(rows)
    for _, r in ipairs(rows) do bools(r) end
    return rows
  end

  local INSERT_ATTEMPT = "INSERT INTO attempts(" .. table.concat(ATTEMPT_FIELDS, ", ") ..
    ", created, uid) VALUES (:" .. table.concat(ATTEMPT_FIELDS, ", :") .. ", :created, " .. M._NEW_UID .. ")"

  --- db:start_run{problem, problem_hash, gpu, policy, config} -> run_id
  Db.start_run = method("db:start_run", function(db, t)
    M._check_table("db:start_run", t)
    M._check_fields("db:start_run", t,
      { problem = true, problem_hash = true, gpu = true, policy = true, config = true })
    local _, id = x(db, "INSERT INTO runs(problem, problem_hash, gpu, policy, config, started, uid) " ..
      "VALUES (:problem, :problem_hash, :gpu, :policy, :config, :started, " .. M._NEW_UID .. ")", {
        problem = t.problem, problem_hash = t.problem_hash, gpu = t.gpu, policy = t.policy,
        config = enc(t.config), started = wall(),
      })
    return id
  end)

  --- db:finish_run(run_id, status, summary) -> true
  Db.finish_run = method("db:finish_run", function(db, run_id, status, summary)
    if type(run_id) ~= "number" then error("db:finish_run: run_id must be a number", 3) end
    if type(status) ~= "string" then error("db:finish_run: status must be a string", 3) end
    x(db, "UPDATE runs SET status = ?, summary = ?, finished = ? WHERE id = ?",
      { status, enc(summary) or json.null, wall(), run_id })
    return true
  end)

  Db.get_run = method("db:get_run", function(db, run_id)
    return one(q(db, "SELECT * FROM runs WHERE id = ?", { run_id }))
  end)

  --- db:runs{problem_hash, gpu, limit} -> rows, newest first
  Db.runs = method("db:runs", function(db, t)
    t = t or {}
    local p = { problem_hash = t.problem_hash, gpu = t.gpu, limit = t.limit or 100 }
    return q(db, "SELECT * FROM runs WHERE 1" .. M._filters(p, { "problem_hash", "gpu" }) ..
      " ORDER BY id DESC LIMIT :limit", p)
  end)

  --- db:add_round{run_id, round, parents, notes} -> round row id
  Db.add_round = method("db:add_round", function(db, t)
    M._check_table("db:add_round", t)
    M._require("db:add_round", t, "run_id", "number")
    M._require("db:add_round", t, "round", "number")
    local _, id = x(db, "INSERT INTO rounds(run_id, round, parents, notes, started) " ..
      "VALUES (:run_id, :round, :parents, :notes, :started)", {
        run_id = t.run_id, round = t.round, parents = enc(t.parents), notes = enc(t.notes),
        started = wall(),
      })
    return id
  end)

  --- db:finish_round(run_id, round, {best_attempt, notes}) -> true
  Db.finish_round = method("db:finish_round", function(db, run_id, round, t)
    t = t or {}
    x(db, "UPDATE rounds SET finished = :finished, best_attempt = coalesce(:best, best_attempt)," ..
      " notes = coalesce(:notes, notes) WHERE run_id = :run_id AND round = :round",
      { finished = wall(), best = t.best_attempt, notes = enc(t.notes), run_id = run_id, round = round })
    return true
  end)

  --- db:add_attempt{run_id, ...} -> attempt_id
  Db.add_attempt = method("db:add_attempt", function(db, t)
    M._check_table("db:add_attempt", t)
    M._require("db:add_attempt", t, "run_id", "number")
    local p = {}
    for k, v in pairs(t) do
      if not ATTEMPT_ALLOWED[k] then error("db:add_attempt: unknown field '" .. tostring(k) .. "'", 3) end
      p[k] = v
    end
    p.metrics = enc(t.metrics)
    p.created = wall()
    local _, id = x(db, INSERT_ATTEMPT, p)
    return id
  end)

  --- db:update_attempt(id, fields) -> true
  Db.update_attempt = method("db:update_attempt", function(db, id, fields)
    if type(id) ~= "number" then error("db:update_attempt: id must be a number", 3) end
    M._check_table("db:update_attempt", fields)
    M._check_fields("db:update_attempt", fields, ATTEMPT_ALLOWED)
    local sets, p = {}, { id = id }
    -- Sorted so the same set of fields always makes the same SQL (one cached statement).
    local names = {}
    for k in pairs(fields) do names[#names + 1] = k end
    table.sort(names)
    for _, k in ipairs(names) do
      sets[#sets + 1] = k .. " = :" .. k
      p[k] = k == "metrics" and enc(fields[k]) or fields[k]
    end
    if #sets == 0 then return true end
    x(db, "UPDATE attempts SET " .. table.concat(sets, ", ") .. " WHERE id = :id", p)
    return true
  end)

  Db.get_attempt = method("db:get_attempt", function(db, id)
    return attempt_row(one(q(db, "SELECT * FROM attempts WHERE id = ?", { id })))
  end)

  --- db:add_reflexion{attempt_id, diagnosis_correct, fix_effective, lessons, avoid, try, text}
  Db.add_reflexion = method("db:add_reflexion", function(db, t)
    M._check_table("db:add_reflexion", t)
    M._check_fields("db:add_reflexion", t, { attempt_id = true, diagnosis_correct = true,
      fix_effective = true, lessons = true, avoid = true, try = true, text = true })
    M._require("db:add_reflexion", t, "attempt_id", "number")
    local _, id = x(db, "INSERT INTO reflexions(attempt_id, diagnosis_correct, fix_effective," ..
      " lessons, avoid, try, text, created, uid) VALUES (:attempt_id, :diagnosis_correct," ..
      " :fix_effective, :lessons, :avoid, :try, :text, :created, " .. M._NEW_UID .. ")", {
        attempt_id = t.attempt_id, diagnosis_correct = t.diagnosis_correct,
        fix_effective = t.fix_effective, lessons = enc(t.lessons), avoid = enc(t.avoid),
        try = enc(t.try), text = t.text, created = wall(),
      })
    return id
  end)

  --- db:attempts_from(parent_id, {run_id}) -> attempts, oldest first
  Db.attempts_from = method("db:attempts_from", function(db, parent_id, opts)
    opts = opts or {}
    if parent_id == nil and opts.run_id == nil then
      error("db:attempts_from: root attempts need opts.run_id", 3)
    end
    local p = { parent = parent_id, run_id = opts.run_id }
    return attempt_rows(q(db, "SELECT * FROM attempts WHERE parent_id IS :parent" ..
      M._filters(p, { "run_id" }) .. " ORDER BY id", p))
  end)

  --- db:was_tried{parent_id, skill, plan_signature, run_id} -> true, attempt | false
  Db.was_tried = method("db:was_tried", function(db, t)
    M._check_table("db:was_tried", t)
    M._check_fields("db:was_tried", t,
      { parent_id = true, skill = true, plan_signature = true, run_id = true })
    local r = one(q(db, "SELECT * FROM attempts WHERE parent_id IS :parent_id" ..
      M._filters(t, { "skill", "plan_signature", "run_id" }) .. " ORDER BY id DESC LIMIT 1", t))
    if r then return true, attempt_row(r) end
    return false
  end)

  --- db:find_fingerprint(run_id or nil, fingerprint) -> earliest attempt or nil
  Db.find_fingerprint = method("db:find_fingerprint", function(db, run_id, fingerprint)
    if type(fingerprint) ~= "string" then error("db:find_fingerprint: fingerprint must be a string", 3) end
    local p = { fingerprint = fingerprint, run_id = run_id }
    return attempt_row(one(q(db, "SELECT * FROM attempts WHERE fingerprint = :fingerprint" ..
      M._filters(p, { "run_id" }) .. " ORDER BY id LIMIT 1", p)))
  end)

  --- db:best_attempt(run_id) -> the fastest correct attempt or nil
  Db.best_attempt = method("db:best_attempt", function(db, run_id)
    if type(run_id) ~= "number" then error("db:best_attempt: run_id must be a number", 3) end
    return attempt_row(one(q(db, "SELECT * FROM attempts WHERE run_id = ? AND correct = 1" ..
      " AND time_ms IS NOT NULL ORDER BY time_ms, id LIMIT 1", { run_id })))
  end)

  --- db:history(run_id, {parent_id, limit = 20}) -> newest first, each with .reflexion
  Db.history = method("db:history", function(db, run_id, opts)
    if type(run_id) ~= "number" then error("db:history: run_id must be a number", 3) end
    opts = opts or {}
    local p = { run_id = run_id, parent_id = opts.parent_id, limit = opts.limit or 20 }
    local window = "SELECT * FROM attempts WHERE run_id = :run_id" ..
      M._filters(p, { "parent_id" }) .. " ORDER BY id DESC LIMIT :limit"
    local rows = q(db, window, p)
    -- The latest reflexion of each listed attempt, in one query.
    local refl = q(db, "SELECT r.* FROM reflexions r JOIN (" .. window ..
      ") a ON r.attempt_id = a.id ORDER BY r.id", p)
    local by_attempt = {}
    for _, r in ipairs(refl) do by_attempt[r.attempt_id] = r end
    for _, a in ipairs(rows) do
      decode(bools(a))
      local r = by_attempt[a.id]
      if r then a.reflexion = decode(bools(r)) end
    end
    return rows
  end)

  -- LLM calls: one row per call of a run (schema version 3), written by agents/run/calls.lua.
  local CALL_FIELDS = { "run_id", "seq", "role", "place", "provider", "model", "input_tokens",
    "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost_usd", "latency", "replayed",
    "outcome", "replay_key" }
  local CALL_ALLOWED = {}
  for _, f in ipairs(CALL_FIELDS) do CALL_ALLOWED[f] = true end
  local INSERT_CALL = "INSERT INTO llm_calls(" .. table.concat(CALL_FIELDS, ", ") ..
    ", created, uid) VALUES (:" .. table.concat(CALL_FIELDS, ", :") .. ", :created, " .. M._NEW_UID .. ")"

  --- db:add_llm_call{run_id, seq, role, place, provider, model, input_tokens, ...} -> id
  Db.add_llm_call = method("db:add_llm_call", function(db, t)
    M._check_table("db:add_llm_call", t)
    M._check_fields("db:add_llm_call", t, CALL_ALLOWED)
    M._require("db:add_llm_call", t, "run_id", "number")
    local p = { created = wall() }
    for k, v in pairs(t) do p[k] = v end
    local _, id = x(db, INSERT_CALL, p)
    return id
  end)

  --- db:llm_calls(run_id) -> the run's calls in the order they were recorded
  Db.llm_calls = method("db:llm_calls", function(db, run_id)
    if type(run_id) ~= "number" then error("db:llm_calls: run_id must be a number", 3) end
    local rows = q(db, "SELECT * FROM llm_calls WHERE run_id = ? ORDER BY id", { run_id })
    for _, r in ipairs(rows) do
      if r.replayed ~= nil then r.replayed = r.replayed ~= 0 end
    end
    return rows
  end)

  --- db:export_run(run_id, path) -> lines written, or nil, err
  Db.export_run = method("db:export_run", function(db, run_id, path)
    if type(run_id) ~= "number" then error("db:export_run: run_id must be a number", 3) end
    if type(path) ~= "string" then error("db:export_run: path must be a string", 3) end
    local run = q(db, "SELECT * FROM runs WHERE id = ?", { run_id })[1]
    if not run then return nil, "EDB: no run " .. run_id, "EDB" end
    local out = {}
    local function emit(kind, row)
      decode(bools(row))
      row.type = kind
      out[#out + 1] = json.encode(row)
    end
    emit("run", run)
    for _, a in ipairs(q(db, "SELECT * FROM attempts WHERE run_id = ? ORDER BY id", { run_id })) do
      emit("attempt", a)
    end
    for _, r in ipairs(q(db, "SELECT r.* FROM reflexions r JOIN attempts a ON r.attempt_id = a.id" ..
      " WHERE a.run_id = ? ORDER BY r.id", { run_id })) do
      emit("reflexion", r)
    end
    local ok, err, code = require("kagent.fs").write(path, table.concat(out, "\n") .. "\n")
    if not ok then return nil, err, code end
    return #out
  end)
end
