-- End to end on the CPU: generation of a first kernel (agents/generate.lua, and beam.lua with no
-- --kernel) against the FAKE LLM server (tests/fixtures/fake_llm/server.py) with scripted replies.
-- Worker 1 writes a wrong kernel and fixes it on refinement; worker 2 only ever writes a failing
-- one, or answers slowly. Candidates are pure PyTorch (CPU mode); needs torch (KAGENT_PYTHON).
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs, json, proc = kagent.fs, kagent.json, kagent.proc
local fake = require("fake_session")
local cpu = fake.cpu()
local root, fx, problem = kagent.root, cpu.fx, cpu.problem


-- First matching rule wins: the refine rule for worker 2's kernel comes before the general one.
local function script(w2_delay)
  return { latency = 0, replies = {
    { match = "GENERATE_FIXTURE_W2", text = cpu.code_block("broken_w2.py") },
    { match = "# REFINE KERNEL", text = cpu.code_block("fast.py") },
    { match = "You are worker 1 of", text = cpu.code_block("broken.py") },
    { match = "You are worker 2 of", text = cpu.code_block("broken_w2.py"), delay = w2_delay },
  } }
end

local function tmpdir(tag)
  return spec.tmpdir(string.format("%s-%06d", tag, math.floor((kagent.time.now() % 1) * 1e6)))
end

-- The run's environment: CPU-mode python, its own memory, and no LLM unless the fake server's port
-- is given (then pointed at it).
local env_for = cpu.env

local function run_script(name, argv, env)
  return fake.run_agent(name, argv, env, 600)
end

local the_run = fake.only_run

local trim = function(t) return (t:gsub("%s+$", "")) end

describe("agents/generate.lua on CPU with the fake LLM server", function()
  it("verifies a first kernel, refining a wrong one, archives it, and beam.lua starts from it", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = tmpdir("gen-e2e")
    local server, port = fake.start(script(0), dir)
    local r = run_script("generate.lua", { "--problem", problem, "--gen-workers", "2", "--refine", "2",
      "--devices", "cpu", "--out", dir .. "/runs" }, env_for(dir, port))
    server:kill()
    if r.code ~= 0 then error("generate.lua exited " .. r.code .. "\n" .. r.stderr:sub(-3000)) end
    local rd = the_run(dir .. "/runs")
    local s = json.decode(fs.read(rd .. "/summary.json"))
    expect.eq(s.mode, "generate")
    expect.eq(s.verified, true)
    expect.eq(s.worker, 1, "only worker 1 can verify")
    expect.eq(s.attempts, 2, "its first kernel failed, the refined one passed")
    expect.truthy(type(s.best_ms) == "number" and s.baselines.eager_ms, "timed next to eager")
    expect.truthy(s.tokens.total > 0 and s.llm_calls >= 3, "tokens accounted")
    expect.eq(trim(fs.read(rd .. "/best_kernel.py")), trim(fs.read(fx .. "fast.py")))
    local w1 = rd .. "/generate/w1/"
    local gp = fs.read(w1 .. "gen_prompt.txt")
    expect.match(gp, "# GENERATE KERNEL")
    expect.match(gp, "class Model", "the problem reaches the prompt")
    expect.match(gp, "pure PyTorch", "CPU mode asks for PyTorch, not Triton")
    expect.eq(json.decode(fs.read(w1 .. "verify_0.json")).ok, false)
    expect.match(fs.read(w1 .. "refine_1_prompt.txt"), "a first implementation of the problem")
    expect.eq(json.decode(fs.read(w1 .. "verify_1.json")).ok, true)
    expect.match(fs.read(rd .. "/generate/w2/gen_prompt.txt"), "You are worker 2 of 2")
    local g = json.decode(fs.read(rd .. "/generate/summary.json"))
    expect.eq(g.winner, 1)
    expect.eq(g.outcomes[1].outcome, "won")
    expect.truthy(g.outcomes[2].outcome ~= "won" and g.outcomes[2].outcome ~= "verified", "worker 2 never verifies")

    -- no --kernel, no LLM: beam.lua falls back to the tuner, starting from the archived kernel
    local b = run_script("beam.lua", { "--problem", problem, "--rounds", "1", "--devices", "cpu",
      "--tune-candidates", "1", "--out", dir .. "/runs2" }, env_for(dir))
    if b.code ~= 0 then error("beam.lua exited " .. b.code .. "\n" .. b.stderr:sub(-3000)) end
    local bs = json.decode(fs.read(the_run(dir .. "/runs2") .. "/summary.json"))
    expect.match(bs.input_kernel, "^archived kernel #")
  end, { timeout = 900 })

  it("is what beam.lua runs first when it has no --kernel and nothing archived", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = tmpdir("gen-beam")
    local server, port = fake.start(script(0), dir)
    local r = run_script("beam.lua", { "--problem", problem, "--rounds", "0", "--gen-workers", "2",
      "--devices", "cpu", "--out", dir .. "/runs" }, env_for(dir, port))
    server:kill()
    if r.code ~= 0 then error("beam.lua exited " .. r.code .. "\n" .. r.stderr:sub(-3000)) end
    local rd = the_run(dir .. "/runs")
    local s = json.decode(fs.read(rd .. "/summary.json"))
    expect.eq(s.input_kernel, "generated (worker 1, 2 attempt(s))")
    expect.eq(trim(fs.read(rd .. "/input_kernel.py")), trim(fs.read(fx .. "fast.py")))
    expect.truthy(fs.exists(rd .. "/generate/w1/refine_1_reply.txt"), "generation traces in the run")
    expect.eq(json.decode(fs.read(rd .. "/generate/summary.json")).winner, 1)
  end, { timeout = 900 })

  it("cancels a worker still waiting on the LLM once another has won", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = tmpdir("gen-cancel")
    local server, port = fake.start(script(120), dir)
    local t0 = kagent.time.now()
    local r = run_script("generate.lua", { "--problem", problem, "--gen-workers", "2", "--devices", "cpu",
      "--out", dir .. "/runs" }, env_for(dir, port))
    local wall = kagent.time.now() - t0
    server:kill()
    if r.code ~= 0 then error("generate.lua exited " .. r.code .. "\n" .. r.stderr:sub(-3000)) end
    local g = json.decode(fs.read(the_run(dir .. "/runs") .. "/generate/summary.json"))
    expect.eq(g.winner, 1)
    expect.eq(g.outcomes[2].outcome, "canceled")
    expect.lt(wall, 100, "did not wait for the 120 s reply")
  end, { timeout = 900 })

  it("fails with each worker's reason when no kernel verifies, and needs an LLM", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = tmpdir("gen-fail")
    local server, port = fake.start({ replies = {
      { match = "# GENERATE KERNEL", text = cpu.code_block("broken_w2.py") },
      { match = "GENERATE_FIXTURE_W2", text = cpu.code_block("broken_w2.py") } } }, dir)
    local f = run_script("generate.lua", { "--problem", problem, "--gen-workers", "2", "--refine", "1",
      "--devices", "cpu", "--out", dir .. "/runs" }, env_for(dir, port))
    server:kill()
    expect.eq(f.code, 1, f.stderr:sub(-2000))
    expect.match(f.stderr, "no generated kernel verified")
    expect.match(f.stderr, "w1 failed: .*GENERATE_FIXTURE_W2")
    expect.match(f.stderr, "w2 failed")
    local g = json.decode(fs.read(the_run(dir .. "/runs") .. "/generate/summary.json"))
    expect.eq(g.winner, json.null)

    local n = run_script("generate.lua", { "--problem", problem, "--devices", "cpu", "--out", dir .. "/runs_nollm" }, env_for(dir))
    expect.eq(n.code, 2)
    expect.match(n.stderr, "no LLM is configured")
  end, { timeout = 900 })
end)
