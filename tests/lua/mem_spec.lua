-- kagent.mem: the Lua API on real SQLite files (generic access, short- and long-term memory).
local mem, json, fs, task = kagent.mem, kagent.json, kagent.fs, kagent.task

local dirs = {}
local function fresh()
  local dir = spec.tmpdir("mem")
  dirs[#dirs + 1] = dir
  local path = fs.join(dir, "sub", "k.db")
  return assert(mem.open(path)), path
end

describe("mem.open", function()
  it("creates the folder and database, migrated to the current schema", function()
    local db, path = fresh()
    expect.truthy(fs.exists(path), "database file")
    expect.eq(db:schema_version(), mem.SCHEMA_VERSION)
    expect.eq(db:query("PRAGMA journal_mode")[1].journal_mode, "wal")
    expect.eq(db:query("PRAGMA foreign_keys")[1].foreign_keys, 1)
    expect.eq(db:path(), path)
    db:close()
  end)

  it("refuses a database from a newer schema with a clear message", function()
    local db, path = fresh()
    db:exec("PRAGMA user_version = 99")
    db:close()
    local none, err, code = mem.open(path)
    expect.eq(none, nil)
    expect.eq(code, "EDB")
    expect.match(err, "schema version 99, newer than this kagent%-rt supports")
  end)

  it("defaults to $KAGENT_DB, else runs/kagent.db", function()
    local expected = os.getenv("KAGENT_DB")
    if not expected or expected == "" then expected = "runs/kagent.db" end
    expect.eq(mem.default_path(), expected)
  end)

  it("fails with EDB on an unusable path, and raises on misuse", function()
    local none, err, code = mem.open("/proc/kagent-no/such/k.db")
    expect.eq(none, nil)
    expect.eq(code, "EDB")
    expect.match(err, "^EDB: ")
    expect.errors(function() mem.open(42) end, "path must be a string")
  end)
end)

describe("db generic access", function()
  it("binds positional and named parameters, booleans and json.null", function()
    local db = fresh()
    local changes, id = db:exec("CREATE TABLE t(a, b, c)")
    expect.eq(changes, 0)
    changes, id = db:exec("INSERT INTO t VALUES (?, ?, ?)", { 1, "x", true })
    expect.eq(changes, 1)
    expect.eq(id, 1)
    db:exec("INSERT INTO t VALUES (:a, :b, :c)", { a = 2.5, c = false })
    db:exec("INSERT INTO t VALUES (?, ?, ?)", { 3, json.null, "z" })
    local rows = db:query("SELECT * FROM t ORDER BY rowid")
    expect.eq(#rows, 3)
    expect.same(rows[1], { a = 1, b = "x", c = 1 })
    expect.eq(rows[2].a, 2.5)
    expect.eq(rows[2].b, nil, "missing named parameter binds NULL")
    expect.eq(rows[2].c, 0)
    expect.eq(rows[3].b, nil)
    expect.eq(#db:query("SELECT * FROM t WHERE a > ?", { 2 }), 2)
    db:close()
  end)

  it("returns EDB for SQL errors and constraint violations", function()
    local db = fresh()
    local none, err, code = db:exec("SELEC 1")
    expect.eq(none, nil)
    expect.eq(code, "EDB")
    expect.match(err, "syntax error")
    none, err = db:query("SELECT * FROM no_such_table", {})
    expect.match(err, "no such table")
    -- Foreign keys are on: an attempt needs an existing run.
    none, err, code = db:add_attempt{ run_id = 12345 }
    expect.eq(none, nil)
    expect.eq(code, "EDB")
    expect.match(err, "FOREIGN KEY")
    db:close()
  end)

  it("raises on misuse", function()
    local db = fresh()
    expect.errors(function() db:exec(42) end, "sql must be a string")
    expect.errors(function() db:exec("SELECT ?", { function() end }) end, "cannot bind a function")
    expect.errors(function() db:query("SELECT ?", { {} }) end, "cannot bind a table")
    expect.errors(function() db:query("SELECT 1; SELECT 2", {}) end, "more than one statement")
    expect.errors(function() db:add_attempt{ run_id = 1, colour = "red" } end, "unknown field 'colour'")
    expect.errors(function() db:start_run("x") end, "expected a table")
    db:close()
    expect.errors(function() db:query("SELECT 1") end, "closed")
  end)

  it("transaction commits, rolls back on error, and refuses to yield", function()
    local db = fresh()
    db:exec("CREATE TABLE t(a)")
    local r = db:transaction(function(d)
      for i = 1, 100 do d:exec("INSERT INTO t VALUES (?)", { i }) end
      return "done"
    end)
    expect.eq(r, "done")
    expect.errors(function()
      db:transaction(function(d)
        d:exec("INSERT INTO t VALUES (0)")
        error("boom")
      end)
    end, "boom")
    expect.errors(function()
      db:transaction(function(d)
        d:exec("INSERT INTO t VALUES (0)")
        task.sleep(0)
      end)
    end)
    expect.eq(db:query("SELECT count(*) AS n FROM t")[1].n, 100)
    db:close()
  end)
end)

describe("short-term memory", function()
  local function seed(db)
    local run = assert(db:start_run{ problem = "p.py", problem_hash = "h", gpu = "H100",
      policy = "beam", config = { beam = 4 } })
    local root = assert(db:add_attempt{ run_id = run, round = 0, stage = "done", correct = true,
      time_ms = 10, fingerprint = "fp-root" })
    return run, root
  end

  it("records a run, attempts and updates", function()
    local db = fresh()
    local run, root = seed(db)
    local a = assert(db:add_attempt{ run_id = run, round = 1, parent_id = root, worker = "w1",
      role = "optimizer", strategy = "s", skill = "vectorize", plan_signature = "p1",
      prompt_path = "r/p.txt", reply_path = "r/r.txt", source_hash = "sh", fingerprint = "fp1",
      stage = "benchmark", error_signature = nil, correct = true, time_ms = 5, speedup_vs_eager = 2,
      speedup_vs_compile = 1.5, metrics = { dram_pct = 91.5 } })
    local got = db:get_attempt(a)
    expect.eq(got.correct, true)
    expect.eq(got.skill, "vectorize")
    expect.eq(type(got.metrics), "string", "JSON columns come back as strings")
    expect.eq(mem.decode(got).metrics.dram_pct, 91.5)
    expect.eq(db:update_attempt(a, { stage = "done", time_ms = 4, metrics = { sm_pct = 3 } }), true)
    got = mem.decode(db:get_attempt(a))
    expect.eq(got.stage, "done")
    expect.eq(got.time_ms, 4)
    expect.eq(got.metrics.sm_pct, 3)
    expect.errors(function() db:update_attempt(a, { nope = 1 }) end, "unknown field")
    expect.eq(db:finish_run(run, "done", { best = a }), true)
    local r = mem.decode(db:get_run(run))
    expect.eq(r.status, "done")
    expect.eq(r.config.beam, 4)
    expect.eq(r.summary.best, a)
    expect.truthy(r.finished >= r.started, "finished time")
    expect.eq(#db:runs{ problem_hash = "h" }, 1)
    expect.eq(#db:runs{ problem_hash = "other" }, 0)
    expect.truthy(db:add_round{ run_id = run, round = 1, parents = { root } })
    expect.eq(db:finish_round(run, 1, { best_attempt = a }), true)
    local _, _, code = db:add_round{ run_id = run, round = 1 }
    expect.eq(code, "EDB", "a round is unique per run")
    db:close()
  end)

  it("answers the policies' questions: children, tried, duplicates, best", function()
    local db = fresh()
    local run, root = seed(db)
    local a1 = db:add_attempt{ run_id = run, parent_id = root, skill = "tiling", plan_signature = "t64",
      fingerprint = "fpA", correct = true, time_ms = 7 }
    local a2 = db:add_attempt{ run_id = run, parent_id = root, skill = "tiling", plan_signature = "t128",
      fingerprint = "fpB", correct = false, stage = "correctness" }
    local a3 = db:add_attempt{ run_id = run, parent_id = a1, skill = "vectorize", fingerprint = "fpA",
      correct = true, time_ms = 3 }
    local kids = db:attempts_from(root)
    expect.eq(#kids, 2)
    expect.eq(kids[1].id, a1)
    expect.eq(kids[2].id, a2)
    expect.eq(#db:attempts_from(nil, { run_id = run }), 1, "root attempts")
    expect.errors(function() db:attempts_from(nil) end, "run_id")

    local tried, which = db:was_tried{ parent_id = root, skill = "tiling", plan_signature = "t128" }
    expect.eq(tried, true)
    expect.eq(which.id, a2)
    expect.eq(db:was_tried{ parent_id = root, skill = "tiling" }, true)
    expect.eq(db:was_tried{ parent_id = root, skill = "tiling", plan_signature = "t32" }, false)
    expect.eq(db:was_tried{ parent_id = a1, skill = "tiling" }, false)
    expect.eq(db:was_tried{ parent_id = nil, skill = nil }, true, "the root itself")

    expect.eq(db:find_fingerprint(run, "fpA").id, a1, "earliest duplicate")
    expect.eq(db:find_fingerprint(nil, "fpB").id, a2)
    expect.eq(db:find_fingerprint(run, "fp-none"), nil)
    local run2 = db:start_run{ problem = "p.py" }
    expect.eq(db:find_fingerprint(run2, "fpA"), nil, "other run")
    expect.eq(db:find_fingerprint(nil, "fpA").id, a1, "any run")

    expect.eq(db:best_attempt(run).id, a3)
    expect.eq(db:best_attempt(run2), nil)
    db:close()
  end)

  it("renders a history window with reflexions, newest first", function()
    local db = fresh()
    local run, root = seed(db)
    local ids = {}
    for i = 1, 5 do
      ids[i] = db:add_attempt{ run_id = run, parent_id = root, skill = "s" .. i, correct = i % 2 == 0,
        metrics = { i = i } }
    end
    assert(db:add_reflexion{ attempt_id = ids[4], diagnosis_correct = true, fix_effective = false,
      lessons = { "l1" }, avoid = { "bank conflicts" }, try = { "swizzle" }, text = "old" })
    assert(db:add_reflexion{ attempt_id = ids[4], diagnosis_correct = false, text = "newer" })
    local h = db:history(run, { limit = 3 })
    expect.eq(#h, 3)
    expect.eq(h[1].id, ids[5])
    expect.eq(h[2].id, ids[4])
    expect.eq(h[2].metrics.i, 4, "metrics decoded")
    expect.eq(h[2].correct, true)
    expect.eq(h[2].reflexion.text, "newer", "latest reflexion")
    expect.eq(h[2].reflexion.diagnosis_correct, false)
    expect.eq(h[1].reflexion, nil)
    expect.eq(#db:history(run, { parent_id = root }), 5)
    expect.eq(#db:history(run, { parent_id = ids[1] }), 0)
    expect.eq(#db:history(run), 6, "default window")
    local text = kagent.prompt.render_string("{{h}}", { h = h }, "history")
    expect.match(text, "newer")
    db:close()
  end)

  it("exports a run as JSON lines", function()
    local db = fresh()
    local run, root = seed(db)
    local a = db:add_attempt{ run_id = run, parent_id = root, metrics = { x = 1 } }
    db:add_reflexion{ attempt_id = a, lessons = { "a", "b" }, text = "t" }
    local out = fs.join(dirs[#dirs], "run.jsonl")
    expect.eq(db:export_run(run, out), 4)
    local kinds, lines = {}, {}
    for line in assert(fs.read(out)):gmatch("[^\n]+") do
      local v = assert(json.decode(line))
      kinds[#kinds + 1] = v.type
      lines[#lines + 1] = v
    end
    expect.same(kinds, { "run", "attempt", "attempt", "reflexion" })
    expect.eq(lines[1].config.beam, 4)
    expect.eq(lines[3].metrics.x, 1)
    expect.same(lines[4].lessons, { "a", "b" })
    local none, err, code = db:export_run(999, out)
    expect.eq(code, "EDB")
    db:close()
  end)
end)

describe("long-term memory", function()
  it("registers skills idempotently and keeps their statistics", function()
    local db = fresh()
    expect.eq(db:register_skill{ name = "tiling", category = "memory", intent = "tile in smem" }, true)
    expect.eq(db:register_skill{ name = "tiling", source_path = "skills/tiling.lua" }, true)
    local skills = db:skills()
    expect.eq(#skills, 1)
    expect.eq(skills[1].intent, "tile in smem", "kept by the second registration")
    expect.eq(skills[1].source_path, "skills/tiling.lua")
    for _, o in ipairs({
      { skill = "tiling", bottleneck = "memory", gpu = "H100", success = true, gain = 1.5 },
      { skill = "tiling", bottleneck = "memory", gpu = "H100", success = true, gain = 2.5 },
      { skill = "tiling", bottleneck = "memory", gpu = "H100", success = false, gain = 0.9 },
      { skill = "tiling", bottleneck = "compute", gpu = "H100", success = false },
      { skill = "fusion", bottleneck = "memory", gpu = "H100", success = true, gain = 1.2 },
    }) do assert(db:record_skill_outcome(o)) end
    expect.eq(#db:skills(), 2, "an unknown skill is registered by its outcome")
    local all = db:skill_stats{}
    expect.eq(#all, 2)
    expect.eq(all[1].skill, "fusion", "best success rate first")
    expect.eq(all[2].attempts, 4)
    expect.eq(all[2].successes, 2)
    expect.eq(all[2].median_gain, 1.5)
    local mem_only = db:skill_stats{ skill = "tiling", bottleneck = "memory", gpu = "H100" }
    expect.eq(#mem_only, 1)
    expect.eq(mem_only[1].attempts, 3)
    expect.near(mem_only[1].success_rate, 2 / 3, 1e-9)
    expect.eq(mem_only[1].median_gain, 1.5)
    expect.eq(#db:skill_stats{ gpu = "A100" }, 0)
    expect.errors(function() db:record_skill_outcome{ skill = "x" } end, "success")
    db:close()
  end)

  it("registers the skills/ folder in one call", function()
    local db = fresh()
    local list = {}
    for _, name in ipairs(fs.list(fs.join(kagent.root, "skills"))) do
      if name:match("%.lua$") then
        local s = dofile(fs.join(kagent.root, "skills", name))
        s.path = fs.join("skills", name)
        list[#list + 1] = s
      end
    end
    expect.truthy(#list > 0, "skills found")
    expect.eq(db:register_skills(list), #list)
    expect.eq(db:register_skills(list), #list, "idempotent")
    local rows = db:skills()
    expect.eq(#rows, #list)
    for _, r in ipairs(rows) do
      expect.truthy(r.intent and r.category and r.source_path, "fields of " .. r.name)
    end
    expect.errors(function() db:register_skills({ { category = "x" } }) end, "no name")
    expect.eq(#db:skills(), #list, "rolled back")
    db:close()
  end)

  it("searches lessons by full text, tolerant of punctuation", function()
    local db = fresh()
    local l1 = db:add_lesson{ text = "Vectorized float4 loads cut DRAM transactions in row reductions",
      tags = { "memory", "reduction" }, problem_hash = "h1", gpu = "H100" }
    local l2 = db:add_lesson{ text = "Tensor cores need K to be a multiple of 16", tags = { "compute" },
      problem_hash = "h2", gpu = "H100" }
    db:add_lesson{ text = "Avoid atomics in the reduction tail", tags = { "reduction" }, problem_hash = "h1" }
    local r = db:search_lessons('how do I cut "DRAM" traffic (float4?) -- AND OR NOT *')
    expect.truthy(#r >= 1, "hits")
    expect.eq(r[1].id, l1, "best match first")
    expect.same(r[1].tags, { "memory", "reduction" })
    expect.truthy(r[1].score ~= nil, "score")
    expect.eq(#db:search_lessons("reduction"), 2)
    expect.eq(#db:search_lessons("reduction", { limit = 1 }), 1)
    expect.eq(#db:search_lessons("reduction", { problem_hash = "h2" }), 0)
    expect.eq(db:search_lessons("tensor", { gpu = "H100" })[1].id, l2)
    expect.eq(#db:search_lessons("compute"), 1, "tags are searched")
    expect.eq(#db:search_lessons("!!! ???"), 3, "no words: newest lessons")
    expect.eq(#db:lessons{ problem_hash = "h1" }, 2)
    expect.eq(db:lessons{}[1].text, "Avoid atomics in the reduction tail")
    db:close()
  end)

  it("archives verified kernels and finds the fastest per problem, GPU and dtype", function()
    local db = fresh()
    db:archive_kernel{ problem_hash = "h", gpu = "H100", source = "slow", time_ms = 3, metrics = { a = 1 } }
    db:archive_kernel{ problem_hash = "h", gpu = "H100", source = "fast", time_ms = 1 }
    db:archive_kernel{ problem_hash = "h", gpu = "H100", dtype = "bf16", source = "bf", time_ms = 0.5 }
    db:archive_kernel{ problem_hash = "h", gpu = "A100", source = "a100", time_ms = 0.1 }
    expect.eq(db:best_archived{ problem_hash = "h", gpu = "H100" }.source, "fast")
    expect.eq(db:best_archived{ problem_hash = "h", gpu = "H100", dtype = "bf16" }.source, "bf")
    expect.eq(db:best_archived{ problem_hash = "h" }.source, "a100", "any GPU")
    expect.eq(db:best_archived{ problem_hash = "other", gpu = "H100" }, nil)
    expect.errors(function() db:archive_kernel{ problem_hash = "h", gpu = "H100", source = "x" } end,
      "time_ms")
    db:close()
  end)

  it("caches LLM responses by key", function()
    local db = fresh()
    expect.eq(db:cache_get("k1"), nil)
    expect.eq(db:cache_put("k1", { model = "m" }, "reply one"), true)
    expect.eq(db:cache_put("k1", { model = "m" }, "reply two"), true)
    local resp, req, created = db:cache_get("k1")
    expect.eq(resp, "reply two")
    expect.eq(json.decode(req).model, "m")
    expect.eq(type(created), "number")
    db:close()
  end)
end)

describe("kagent.mem spec", function()
  it("removes its temporary folders", function()
    for _, dir in ipairs(dirs) do
      expect.eq(kagent.proc.run({ "rm", "-rf", dir }).code, 0)
    end
  end)
end)
