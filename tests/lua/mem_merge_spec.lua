-- db:merge through the typed API: two task databases written as agents write them join a main
-- database once, with their history, skill record, lessons, archive and LLM replies.
local mem, fs, json, proc = kagent.mem, kagent.fs, kagent.json, kagent.proc

-- One task's run: an input and two children (the second from the first), reflexions, a skill
-- outcome, a lesson, an archived kernel and a recorded LLM reply.
local function task_run(path, tag)
  local db = assert(mem.open(path))
  local run = db:start_run{ problem = tag .. ".py", problem_hash = "h-" .. tag, gpu = "cpu", policy = "beam" }
  local input = db:add_attempt{ run_id = run, round = 0, role = "input", time_ms = 2.0, correct = true }
  local c1 = db:add_attempt{ run_id = run, round = 1, parent_id = input, role = "optimizer", skill = "fusion",
    time_ms = 1.5, correct = true }
  local c2 = db:add_attempt{ run_id = run, round = 2, parent_id = c1, role = "optimizer", skill = "ilp",
    time_ms = 1.2, correct = true }
  db:add_reflexion{ attempt_id = c1, lessons = { tag .. " fused" } }
  db:record_skill_outcome{ skill = "fusion", success = true, gain = 2.0 / 1.5, gpu = "cpu", run_id = run, attempt_id = c1 }
  db:add_lesson{ text = "lesson of " .. tag .. " about vectorized loads", problem_hash = "h-" .. tag, source_attempt = c1 }
  db:archive_kernel{ problem_hash = "h-" .. tag, gpu = "cpu", source = "# best of " .. tag, time_ms = 1.2,
    run_id = run, attempt_id = c2 }
  db:cache_put("reply-" .. tag, { q = tag }, "answer " .. tag)
  db:finish_run(run, "done", { best_ms = 1.2 })
  db:close()
end

describe("db:merge", function()
  it("adds each task's rows once and keeps their links", function()
    local dir = spec.tmpdir("mem-merge")
    task_run(dir .. "/a.db", "A")
    task_run(dir .. "/b.db", "B")
    local main = assert(mem.open(dir .. "/main.db"))
    local ca = assert(main:merge(dir .. "/a.db"))
    expect.eq(ca.runs, 1)
    expect.eq(ca.attempts, 3)
    expect.eq(ca.reflexions, 1)
    expect.eq(ca.skill_outcomes, 1)
    expect.eq(ca.skills, 1, "the skill is registered with its first outcome")
    expect.eq(ca.lessons, 1)
    expect.eq(ca.archive, 1)
    expect.eq(ca.llm_cache, 1)
    assert(main:merge(dir .. "/b.db"))
    local again = assert(main:merge(dir .. "/a.db"))
    for table, n in pairs(again) do expect.eq(n, 0, table .. " after a second merge") end

    -- the history of B's run, read through the typed API, is whole and in its own run
    local runs = main:runs{ problem_hash = "h-B" }
    expect.eq(#runs, 1)
    local hist = main:history(runs[1].id, { limit = 10 })
    expect.eq(#hist, 3)
    expect.eq(hist[1].round, 2)
    expect.eq(main:get_attempt(hist[1].parent_id).round, 1, "the child's parent is B's round-1 attempt")
    expect.eq(main:get_attempt(hist[1].parent_id).run_id, runs[1].id)
    expect.eq(hist[2].reflexion.lessons[1], "B fused")
    local stats = main:skill_stats{ skill = "fusion" }
    expect.eq(stats[1].attempts, 2, "both tasks' outcomes count in the skill's record")
    expect.eq(#main:search_lessons("vectorized", {}), 2)
    expect.eq(main:best_archived{ problem_hash = "h-A", gpu = "cpu" }.source, "# best of A")
    expect.eq(main:cache_get("reply-B"), "answer B")
    expect.eq(#main:query("SELECT * FROM pragma_foreign_key_check"), 0)
    main:close()
    proc.run({ "rm", "-rf", dir })
  end)

  it("returns EDB for a missing file and raises inside a transaction", function()
    local dir = spec.tmpdir("mem-merge-err")
    local main = assert(mem.open(dir .. "/main.db"))
    local ok, err, code = main:merge(dir .. "/none.db")
    expect.eq(ok, nil)
    expect.eq(code, "EDB")
    expect.match(err, "no database file")
    expect.falsy(fs.exists(dir .. "/none.db"), "merging does not create the source")
    task_run(dir .. "/a.db", "A")
    expect.errors(function() main:transaction(function(d) d:merge(dir .. "/a.db") end) end, "transaction")
    expect.errors(function() main:merge(42) end, "path must be a string")
    expect.eq(assert(main:merge(dir .. "/a.db")).attempts, 3)
    main:close()
    proc.run({ "rm", "-rf", dir })
  end)
end)
