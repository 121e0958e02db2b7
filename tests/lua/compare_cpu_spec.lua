-- agents/compare.lua on the CPU: two policies (beam, greedy) over three small problems, first live
-- against the FAKE LLM server (recording its replies), then from that record with the server gone
-- (its URL a port nothing listens on): every call answered, nothing sent, the same attempts, and
-- the table, JSON and page. Needs a python with torch (KAGENT_PYTHON).
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs, json, proc = kagent.fs, kagent.json, kagent.proc
local fake = require("fake_session")
local session = require("replay_session")

-- three op classes, so what one problem's runs record (lessons, skill records) cannot change
-- another's prompts
local PROBLEMS = { "rmsnorm_small", "relu_signed", "matmul_small" }
-- A kernel that fails verification on relu_signed (a wrong output, every time).
local BROKEN = "Shifted.\n```python\nimport torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
  .. "    def __init__(self):\n        super().__init__()\n\n    def forward(self, x):\n        return x + 1.0\n```\n"

-- the replies: rmsnorm_small gets a kernel 5x faster than its first one, relu_signed a wrong one,
-- matmul_small its own kernel with a comment (a duplicate of its parent): every outcome is decided
-- by a wide gap, a wrong output or a fingerprint, never by a close timing
local function script()
  local s = session.script()
  local same = "Same kernel.\n```python\n# reformatted\n" .. fs.read(kagent.root .. "/examples/kernels/cpu/matmul_small.py") .. "```\n"
  local replies = { s.replies[1], s.replies[2],
    { match = "torch.mean(x ** 2", text = fake.cpu().code_block("fast.py") },
    { match = "torch.relu(x)", text = BROKEN }, { match = "torch.matmul(A, B)", text = same } }
  return { latency = 0, replies = replies }
end

local function compare(dir, out, mode, port)
  local probs = {}
  for i, n in ipairs(PROBLEMS) do probs[i] = kagent.root .. "/examples/problems/" .. n .. ".py" end
  local argv = { "--policies", "beam,greedy", "--problems", table.concat(probs, ","), "--kernels", dir .. "/kernels",
    "--devices", "cpu", "--rounds", "1", "--beam", "1", "--directions", "1", "--refine", "0", "--gate", "noise", "--out", out,
    "--model", "openai:fake" }
  if mode == "live" then argv[#argv + 1] = "--live" else argv[#argv + 1] = "--replay"; argv[#argv + 1] = dir .. "/live/llm_cache.db" end
  return fake.run_agent("compare.lua", argv, fake.env(port, { KAGENT_PYTHON = spec.python, KAGENT_DB = false,
    KAGENT_LLM_DB = false }), 900)
end

-- outcomes(doc) -> "policy problem rRwW outcome" for every attempt of every run of a comparison
local function outcomes(doc)
  local out = {}
  for _, p in ipairs(doc.policies) do
    for _, r in ipairs(p.results) do
      local st = json.decode(fs.read(r.run_dir .. "/state.json") or "null")
      for _, a in ipairs(type(st) == "table" and st.attempts or {}) do
        out[#out + 1] = string.format("%s %s r%dw%d %s", p.policy, r.name, a.round, a.worker,
          a.outcome == "failed" and ("failed:" .. tostring(a.stage)) or a.outcome)
      end
    end
  end
  table.sort(out)
  return out
end

-- verdicts(doc) -> the verdicts on the attempts of every run of a comparison, keyed "policy problem rRwW"
local function verdicts(doc)
  local out = {}
  for _, p in ipairs(doc.policies) do
    for _, r in ipairs(p.results) do session.verdicts(r.run_dir, p.policy .. " " .. r.name .. " ", out) end
  end
  return out
end

describe("agents/compare.lua", function()
  it("compares two policies from a recorded cache with the network gone, as they ran live", function()
    if not fake.cpu().have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir, replay, a, b
    -- a replay asks the recorded questions where the evaluator gives the recorded verdicts; on a
    -- loaded CPU it may refuse a timing in one comparison only, and the replay then rightly
    -- misses: misses must come with different verdicts, and the comparison is made again once
    for try = 1, 2 do
      dir = spec.tmpdir("compare")
      fs.mkdir_p(dir .. "/kernels")
      for _, n in ipairs({ "relu_signed", "matmul_small" }) do fs.write(dir .. "/kernels/" .. n .. ".py", fs.read(kagent.root .. "/examples/kernels/cpu/" .. n .. ".py")) end
      fs.write(dir .. "/kernels/rmsnorm_small.py", fs.read(session.kernel))
      local server, port = fake.start(script(), dir)
      local live = compare(dir, dir .. "/live", "live", port)
      server:kill()
      if live.code ~= 0 then error("live comparison exited " .. live.code .. "\n" .. live.stderr:sub(-3000)) end
      replay = compare(dir, dir .. "/replay", "replay", session.DEAD_PORT)
      if replay.code ~= 0 and replay.code ~= 4 then
        error("replayed comparison exited " .. replay.code .. "\n" .. replay.stderr:sub(-3000))
      end
      a = json.decode(assert(fs.read(dir .. "/live/compare.json")))
      b = json.decode(assert(fs.read(dir .. "/replay/compare.json")))
      if replay.code == 0 then break end
      -- misses: some attempt measured before them must have had another verdict, or the keys are wrong
      local diff = session.differing(verdicts(a), verdicts(b))
      if #diff == 0 then
        error("the replay missed although every attempt it measured had the live verdict:\n" .. replay.stderr:sub(-2000))
      end
      print(string.format("     (try %d: the evaluator's verdicts differed between the live and the replayed comparison on "
        .. "this loaded machine: %s)", try, table.concat(diff, "; ")))
      if try == 2 then error("the evaluator gave different verdicts twice: " .. table.concat(diff, "; ")) end
    end

    print((replay.stdout:gsub("\n+$", ""):gsub("\n", "\n     ")))
    expect.eq(#b.policies, 2)
    expect.eq(b.meta.mode, "replay")
    for i, p in ipairs(b.policies) do
      local rec = a.policies[i].replay
      expect.truthy(rec.sent > 0 and rec.hits == 0, p.policy .. ": the live comparison asked the model")
      expect.same(p.replay, { calls = rec.sent, hits = rec.sent, misses = 0, sent = 0 }, p.policy .. ": every call replayed, none sent")
      expect.eq(p.aggregate.problems, #PROBLEMS)
      expect.eq(p.aggregate.finished, #PROBLEMS, p.policy .. ": every problem finished")
      -- per model over the policy's runs: the one fake model wrote every attempt
      local m = p.models and p.models["openai:fake"]
      expect.truthy(m, p.policy .. ": per-model figures: " .. json.encode(p.models))
      expect.eq(m.attempts, #PROBLEMS, p.policy .. ": one attempt per problem, all by the fake model")
    end
    expect.match(replay.stdout, "| beam | openai:fake | 3 |")
    local oa, ob = outcomes(a), outcomes(b)
    local seen = table.concat(ob, "; ")
    expect.eq(#ob, 2 * #PROBLEMS, "one attempt per problem and policy: " .. seen)
    expect.same(ob, oa, "the same attempts with the same outcomes")
    expect.truthy(seen:find("beam rmsnorm_small r1w1 improved", 1, true), "the fast kernel improved: " .. seen)
    expect.truthy(seen:find("greedy relu_signed r1w1 failed:correctness", 1, true), "the wrong kernel failed: " .. seen)
    expect.truthy(seen:find("beam matmul_small r1w1 duplicate", 1, true), "the copy is a duplicate: " .. seen)
    -- the table names every figure; the page has a chart per figure measured
    expect.match(replay.stdout, "| policy | correctness rate | fast_1%.0 vs eager | fast_1%.2 vs eager |")
    expect.match(replay.stdout, "| beam | %d+%% |")
    expect.match(replay.stdout, "| greedy | %d+%% |")
    expect.truthy(replay.stdout:find(string.format("| %d / 0 / 0 |", b.policies[1].replay.calls), 1, true), "replayed / missed / sent")
    local page = assert(fs.read(dir .. "/replay/index.html"))
    for _, id in ipairs({ "spec-correctness-rate", "spec-geomean-eager", "spec-tokens", "spec-wall-s" }) do
      expect.truthy(page:find('data-spec="' .. id .. '"', 1, true), "chart " .. id)
    end
    expect.truthy(fs.exists(dir .. "/replay/beam/index.html"), "each policy's sweep page")
  end, { timeout = 900 })

  it("refuses a comparison without its source of answers, with one policy, or with an option a policy does not take", function()
    local r = fake.run_agent("compare.lua", { "--policies", "beam", "--problems", kagent.root .. "/examples/problems/softmax.py",
      "--replay", "/nonexistent.db" }, { KAGENT_PYTHON = spec.python }, 60)
    expect.eq(r.code, 2)
    expect.match(r.stderr, "two or more policies")
    r = fake.run_agent("compare.lua", { "--policies", "beam,greedy", "--problems", kagent.root .. "/examples/problems/softmax.py" },
      { KAGENT_PYTHON = spec.python }, 60)
    expect.eq(r.code, 2)
    expect.match(r.stderr, "%-%-replay CACHE%.db or %-%-live")
    -- an option one policy's script does not take: refused before any policy runs, no folder made
    local out = spec.tmpdir("compare-refused") .. "/cmp"
    r = fake.run_agent("compare.lua", { "--policies", "beam,fuse", "--problems", kagent.root .. "/examples/problems/softmax.py",
      "--live", "--model", "openai:fake", "--rounds", "2", "--out", out }, { KAGENT_PYTHON = spec.python }, 60)
    expect.eq(r.code, 2, r.stderr)
    expect.match(r.stderr, "policy fuse: the runs' option %-%-rounds: agents/fuse%.lua does not take it")
    expect.falsy(fs.exists(out), "nothing started")
    -- a record that is not one would fail every call of every run: refused at once
    local notdb = spec.tmpdir("compare-notdb") .. "/cache.db"
    fs.write(notdb, "not a database\n")
    r = fake.run_agent("compare.lua", { "--policies", "beam,greedy", "--problems", kagent.root .. "/examples/problems/softmax.py",
      "--replay", notdb, "--model", "openai:fake", "--out", out }, { KAGENT_PYTHON = spec.python }, 60)
    expect.eq(r.code, 2, r.stderr)
    expect.match(r.stderr, "not an LLM record")
    expect.falsy(fs.exists(out), "nothing started")
  end)
end)
