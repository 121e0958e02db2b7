-- agents/search/review.lua and agents/run/review_inputs.lua as a function of its inputs: a FAKE run (a FAKE LLM that answers from a
-- list, a FAKE evaluator pool whose verify refuses a kernel marked BREAKS on the proposal "t", a
-- FAKE memory database in a table). Which kernels --review off|final|finalists|all reviews, that a
-- refused kernel leaves the finalists and the beam, and that a breaking input is stored and goes
-- into every later job, this run's and a later run's. No Python, no network.
package.path = kagent.root .. "/?.lua;" .. kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fake_chat = require("fake_chat")
local json = kagent.json
local run_lib = require("agents.run")
local rundir = require("agents.run.rundir")
local review = require("agents.search.review")

local PROPOSALS = "```json\n" .. json.encode({ proposals = { { id = "t", calls = { { inputs = { { layout = "transposed" } } } } } } }) .. "\n```"

local function fake_db()
  local rows = {}
  return { measurement_get = function(_, kind, key) return rows[kind .. key] end,
    measurement_put = function(_, kind, key, v) rows[kind .. key] = json.decode(json.encode(v)) end }
end

local function fake_run(mode, replies, db)
  local fake_llm, sent = fake_chat(replies)
  local pool = { jobs = {} }
  function pool:verify(job)
    self.jobs[#self.jobs + 1] = job
    local ids = {}
    for _, p in ipairs(job.extra_trials or {}) do ids[#ids + 1] = p.id end
    if job.candidate:find("CRASHES") and #ids > 0 and ids[#ids] == "t" then
      return { ok = false, stage = "run", code = "ECUDA", error = "ECUDA: an illegal memory access" }
    end
    local failed = job.candidate:find("BREAKS") and job.extra_trials and job.extra_trials[#job.extra_trials]
    if failed then
      return { ok = false, stage = "correctness", code = "EREVIEW", error = "EREVIEW: reviewer input " .. failed.id,
        review = { passed = {}, refused = {}, failed = { id = failed.id, call = 1, proposal = failed } } }
    end
    return { ok = true, stage = "done", review = { passed = ids, refused = {} } }
  end
  local r = { opts = { review = mode, max_tokens = 100, finalists = 2 }, llm = fake_llm, model = "openai:fake", pool = pool,
    rd = assert(rundir.open(spec.tmpdir("review"), "run")), problem_code = "class Model: pass", dtype = "fp32",
    gpu_text = "FAKE", can_profile = false, device_name = "fake", db = db or fake_db(), problem_path = "p.py",
    skills = require("agents.lib.skills").load(kagent.root .. "/skills") }
  run_lib.add_helpers(r)
  return r, sent, pool
end

local function kernel(id, code) return { id = id, fingerprint = "fp-" .. id, code = code } end

describe("review.lua", function()
  it("asks nothing and adds no trials with --review off", function()
    local run, sent, pool = fake_run("off", { PROPOSALS })
    expect.eq(review.check(run, kernel("a", "BREAKS"), "final"), true)
    expect.eq(#review.finalists(run, { kernel("a", "x") }, {}), 1)
    expect.eq(#sent, 0)
    expect.eq(#pool.jobs, 0)
    expect.eq(run.job("code").extra_trials, nil)
    expect.eq(review.summary(run).reviewed, 0)
  end)

  it("refuses a kernel the proposal breaks, once, and puts the input into every later job", function()
    local db = fake_db()
    local run, sent, pool = fake_run("final", { PROPOSALS }, db)
    local ok, why = review.check(run, kernel("bad", "BREAKS"), "final")
    expect.eq(ok, false)
    expect.match(why, "^EREVIEW")
    expect.eq(#sent, 1)
    expect.match(sent[1].messages[1].content, "# REVIEW: INPUTS THAT SHOULD BREAK THIS KERNEL")
    expect.eq(review.check(run, kernel("bad", "BREAKS"), "final"), false, "the verdict is kept")
    expect.eq(#sent, 1, "and the reviewer not asked again")
    local trials = run.job("code").extra_trials
    expect.eq(#trials, 1)
    expect.match(trials[1].id, "^input%-")
    expect.eq(trials[1].calls[1].inputs[1].layout, "transposed")
    expect.eq(run.job("code", { problem = "other.py" }).extra_trials, nil, "not in another problem's job")
    local s = review.summary(run)
    expect.eq(s.refused_kernels[1].kernel, "bad")
    expect.eq(s.inputs_added, 1)
    expect.eq(#pool.jobs[1].extra_trials, 1, "the review job ran the reviewer's proposal")
    -- a later run on the same problem and dtype: the stored input is among its trials, no reviewer
    local later, sent2 = fake_run("off", {}, db)
    expect.eq(later.job("code").extra_trials[1].id, trials[1].id)
    expect.eq(#sent2, 0)
  end)

  it("reviews only the kernel being confirmed with final, every finalist with finalists", function()
    local run, sent = fake_run("final", { PROPOSALS, PROPOSALS })
    local fin = { kernel("a", "BREAKS"), kernel("b", "ok") }
    expect.eq(#review.finalists(run, fin, {}), 2, "final reviews no finalist ahead of its confirmation")
    expect.eq(#sent, 0)
    local run2, sent2 = fake_run("finalists", { PROPOSALS, PROPOSALS, PROPOSALS })
    local tried = {}
    local left = review.finalists(run2, { kernel("a", "BREAKS"), kernel("b", "ok"), kernel("c", "BREAKS") }, tried)
    expect.eq(#sent2, 2, "the top --finalists (2) are reviewed")
    expect.eq(#left, 2)
    expect.eq(left[1].id, "b")
    expect.eq(left[2].id, "c", "a kernel past the top finalists is not reviewed here")
    expect.eq(tried[1].id, "a")
    expect.eq(tried[1].stage, "review")
  end)

  it("takes refused kernels out of the beam with all, but never empties it", function()
    local run = fake_run("all", { PROPOSALS, PROPOSALS, PROPOSALS })
    local beam = review.kept(run, { kernel("a", "BREAKS"), kernel("b", "ok") })
    expect.eq(#beam, 1)
    expect.eq(beam[1].id, "b")
    local only = review.kept(run, { kernel("c", "BREAKS") })
    expect.eq(only[1].id, "c", "a beam of refused kernels stays a beam (none of them can be the result)")
    expect.eq(review.check(run, kernel("c", "BREAKS"), "final"), false)
  end)

  it("finds the proposal that crashes a kernel by running each alone, and stores it", function()
    local two = "```json\n" .. json.encode({ proposals = { { id = "z", calls = { { inputs = { { values = "zeros" } } } } },
      { id = "t", calls = { { inputs = { { layout = "transposed" } } } } } } }) .. "\n```"
    local run, _, pool = fake_run("final", { two })
    local ok, why = review.check(run, kernel("a", "CRASHES"), "final")
    expect.eq(ok, false)
    expect.match(why, "^ECUDA")
    expect.eq(#pool.jobs, 3, "the review job, then z alone (passes), then t alone (fails)")
    local stored = review.inputs(run)
    expect.eq(#stored, 1)
    expect.eq(stored[1].calls[1].inputs[1].layout, "transposed")
  end)

  it("judges a kernel on the stored inputs alone when the reply is lost", function()
    local run, _, pool = fake_run("final", { "no idea", "still no idea" })
    expect.eq(review.check(run, kernel("a", "fine"), "final"), true)
    expect.eq(#pool.jobs, 0, "nothing to run")
    expect.eq(run.reply_stats:summary().by_role.review.lost, 1, "the reply is counted lost")
  end)
end)
