-- agents/sweep.lua --kernelbench on the CPU: the KernelBench table (agents/tools/sweep/levels.lua),
-- and a sweep of six shrunk KernelBench problems (two per level, the LLM-free floor, fuse
-- --no-llm) killed after its third problem, packed (--pack) and finished from the pack
-- (--resume) with another database, as a sweep carried to another machine is. The problems are
-- read from the project's KernelBench copy (../shared/data/kernelbench, or KAGENT_KERNELBENCH);
-- the sweep is skipped with the reason where it or torch is absent.
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs, json, proc = kagent.fs, kagent.json, kagent.proc
local levels = require("agents.tools.sweep.levels")
local kb = require("agents.tools.sweep.kernelbench")
local sweep = require("sweep_session")

local KB = os.getenv("KAGENT_KERNELBENCH") or fs.abspath(kagent.root .. "/../shared/data/kernelbench")
-- small and quick once shrunk (batch 2, images 16x16): about ten seconds each on a CPU
local PROBLEMS = { "level1/19_ReLU.py", "level1/21_Sigmoid.py", "level2/1_Conv2D_ReLU_BiasAdd.py",
  "level2/17_Conv2d_InstanceNorm_Divide.py", "level3/4_LeNet5.py", "level3/17_SqueezeNetFireModule.py" }

local function row(name, level, verified, eager, compile, extra)
  local r = { name = name, level = level, status = "done", verified = verified, speedup = { eager = eager, compile = compile },
    gpu_hours = 0.5, problem_s = 10 }
  for k, v in pairs(extra or {}) do r[k] = v end
  return r
end

describe("the KernelBench table", function()
  it("counts fast_0 and fast_1 per level over every problem, and says why a row has no kernel", function()
    local rows = {
      row("a", 1, true, 2.0, 0.5),
      row("b", 1, true, 0.8, nil),
      row("c", 1, false, nil, nil, { fuse = { first_stage = "compose", first_reason = "EMISMATCH: outputs differ" } }),
      row("d", 1, false, nil, nil, { summary_error = "ENOISY: the machine was too noisy", stop_reason = "confirm" }),
      row("e", 2, false, nil, nil, { fuse = { first_stage = "decompose", first_reason = "control flow" } }),
      row("f", 2, false, nil, nil, { exit_code = 7, status = "unconfirmed" }),
      row("g", 2, true, 1.5, 1.2),
      { name = "h", level = 3, status = "pending", verified = false, speedup = {} },
    }
    local agg = levels.aggregate(rows)
    local l1, l2, l3 = agg.levels[1], agg.levels[2], agg.levels[3]
    expect.eq(l1.level, 1)
    expect.eq(l1.problems, 4)
    expect.eq(l1.correct, 2)
    expect.eq(l1.compiled, 4, "correct, refused for its outputs, and unmeasured all compiled")
    expect.eq(l1.not_measured, 1)
    expect.near(l1.fast_p.eager["0"], 2 / 4, 1e-12)
    expect.near(l1.fast_p.eager["1"], 1 / 4, 1e-12, "only a is faster than eager")
    expect.near(l1.fast_p.compile["0"], 1 / 4, 1e-12, "b has no compile figure: not fast")
    expect.eq(l1.fast_p.compile["1"], 0)
    expect.near(l1.geomean.eager.value, math.sqrt(2.0 * 0.8), 1e-12)
    expect.eq(l1.geomean.compile.n, 1)
    expect.near(l1.gpu_hours, 2, 1e-12)
    expect.eq(l2.compiled, 2, "a decomposition refused never compiled")
    expect.eq(l2.not_measured, 1, "exit 7 is the machine's")
    expect.near(l2.fast_p.compile["1"], 1 / 3, 1e-12)
    expect.eq(l3.finished, 0)
    expect.eq(l3.fast_p.eager["0"], json.null, "no problem of level 3 measured eager: no figure")
    local text = levels.table_text(rows, agg, true)
    expect.match(text, "| 1 | 4 | 4 | 4 | 2 | 50%% | 25%% | 25%% | 0%% |")
    expect.match(text, "| 2 | e | done | no | no | %- | %- | refused at decompose: control flow |")
    expect.match(text, "| 1 | d | done | yes | no | %- | %- | not measured %(the machine%): ENOISY")
    expect.match(text, "| 2 | f | unconfirmed | yes | no | %- | %- | not measured %(the machine%): exit 7")
    expect.match(text, "| 3 | h | pending |")
    rows[1].shrunk = { batch_size = { 128, 2 } }
    expect.eq(levels.result_text(rows[1]), "correct, faster than eager; shrunk: batch_size 128→2")
  end)

  it("finds problems by level or by name, and says what is missing", function()
    if not fs.is_dir(KB) then skip("no KernelBench copy at " .. KB .. " (set KAGENT_KERNELBENCH)") end
    local all = assert(kb.problems(KB, "1"))
    expect.match(all, "level1/1_Square_matrix_multiplication_%.py,[^,]*/level1/2_")
    expect.falsy(all:find("level2/", 1, true))
    local some = assert(kb.problems(KB, "2,3", "1_MLP,level2/12_Gemm_Multiply_LeakyReLU.py"))
    expect.eq(some, KB .. "/level3/1_MLP.py," .. KB .. "/level2/12_Gemm_Multiply_LeakyReLU.py")
    local none, why = kb.problems(KB, "1", "no_such_problem")
    expect.eq(none, nil)
    expect.match(why, "no problem no_such_problem in ")
    expect.match(select(2, kb.problems(KB, "1,x")), "%-%-levels 1,x: expects level numbers")
  end)

  it("finds a carried sweep's problems under this machine's KernelBench", function()
    if not fs.is_dir(KB) then skip("no KernelBench copy at " .. KB .. " (set KAGENT_KERNELBENCH)") end
    local plan = { problems = { { name = "19_ReLU", problem = "/elsewhere/kb/level1/19_ReLU.py" } } }
    kb.mark(plan, "/elsewhere/kb")
    expect.eq(plan.problems[1].level, 1)
    expect.eq(plan.problems[1].kernelbench_path, "level1/19_ReLU.py")
    expect.match(kb.reroot(plan, nil), "no file /elsewhere/kb/level1/19_ReLU%.py; give %-%-kernelbench DIR")
    expect.eq(kb.reroot(plan, KB), nil)
    expect.eq(plan.problems[1].problem, KB .. "/level1/19_ReLU.py")
    expect.eq(plan.kernelbench, KB)
    local other = { problems = { { name = "x", problem = "/elsewhere/x.py" } } }
    expect.match(kb.reroot(other, KB), "no file /elsewhere/x%.py %(the sweep's problem files must be where")
  end)
end)

local have_torch = require("fake_session").cpu().have_torch

-- files(dir) -> every file under dir, relative to it, sorted
local function files(dir, prefix, out)
  out = out or {}
  for _, n in ipairs(fs.list(dir) or {}) do
    local rel = prefix and (prefix .. "/" .. n) or n
    if fs.is_dir(dir .. "/" .. n) then files(dir .. "/" .. n, rel, out) else out[#out + 1] = rel end
  end
  table.sort(out)
  return out
end

-- done_rows(table_md) -> the problem rows of the KernelBench table whose run finished
local function done_rows(text)
  local n, all = 0, 0
  for line in text:gmatch("[^\n]+") do
    local status = line:match("^| %d | [^|]+ | (%a+) | %a+ | %a+ |")
    if status then
      all = all + 1
      if status == "done" then n = n + 1 end
    end
  end
  return n, all
end

-- stop_orphans(out): the run a SIGKILLed driver left going is stopped (its pid is in its task
-- record): TERM first, so it closes its evaluator workers and their job folders, then KILL
local function stop_orphans(out)
  for _, n in ipairs(fs.list(out .. "/tasks") or {}) do
    local rec = json.decode(fs.read(out .. "/tasks/" .. n) or "null")
    local last = type(rec) == "table" and rec.launches and rec.launches[#rec.launches]
    local function alive()
      return (fs.read("/proc/" .. tostring(last.pid) .. "/cmdline") or ""):find(out, 1, true) ~= nil
    end
    if last and last.pid and last.finished == nil then
      for _, sig in ipairs({ "TERM", "KILL" }) do
        if alive() then
          proc.run({ "kill", "-" .. sig, tostring(last.pid) }, { timeout = 10 })
          for _ = 1, 150 do
            if not alive() then break end
            kagent.task.sleep(0.2)
          end
        end
      end
    end
  end
end

describe("agents/sweep.lua --kernelbench on the CPU (fuse --no-llm, --shrink)", function()
  it("has its table after each problem, packs, and finishes from the pack", function()
    if not fs.is_dir(KB) then skip("no KernelBench copy at " .. KB .. " (set KAGENT_KERNELBENCH)") end
    if not have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("sweep-kb")
    local out, pack = dir .. "/sweep", dir .. "/pack"
    local env = { KAGENT_PYTHON = spec.python, KAGENT_DB = false, KAGENT_LLM_DB = false, KAGENT_LLM_URL = false,
      KAGENT_MODEL = false, OPENAI_API_KEY = false, ANTHROPIC_API_KEY = false, KAGENT_LLM_CACHE = false,
      KAGENT_PROGRESS = "lines", KAGENT_SWEEP_HEARTBEAT = "1" }
    -- no --policy: the LLM-free floor, fuse --no-llm
    local argv = { "--kernelbench", KB, "--problems", table.concat(PROBLEMS, ","), "--devices", "cpu", "--shrink",
      "--out", out, "--db", dir .. "/a.db" }

    -- first job: killed (SIGKILL, as a job's time limit does) once its third problem is in the table
    local p = sweep.spawn_sweep(argv, env)
    sweep.wait_for(function() return sweep.finished(out) >= 3 end, 900, "the sweep's third problem")
    p:kill("KILL")
    p:wait(30)
    stop_orphans(out)
    local plan = sweep.sweep_json(out)
    expect.eq(plan.policy, "fuse")
    expect.eq(table.concat(plan.policy_args, " "), "--shrink --no-llm")
    local done, all = done_rows(assert(fs.read(out .. "/table.md")))
    expect.eq(done, 3, "the killed sweep's table has its three finished problems")
    expect.eq(all, #PROBLEMS, "and a row for every problem")
    expect.match(fs.read(out .. "/logs/19_ReLU.log"), "%-%-shrink: batch_size 4096→2")
    expect.match(fs.read(out .. "/table.md"), "| 1 | 19_ReLU | done | yes | [^\n]*; shrunk: batch_size 4096→2, dim 393216→16 |",
      "a row run at smaller sizes says so")

    -- --pack: only sweep.json, table.md and each finished run's summary and best kernel
    local rp = sweep.check_exit(assert(proc.run({ os.getenv("KAGENT_BIN") or "/proc/self/exe", "--env-file", "/dev/null",
      kagent.root .. "/agents/sweep.lua", "--out", out, "--pack", pack }, { cwd = kagent.root, env = env, timeout = 120 })), out)
    expect.eq(rp.code, 0, rp.stderr)
    local packed = files(pack)
    local runs = 0
    for _, f in ipairs(packed) do
      if f:match("/summary%.json$") then runs = runs + 1 end
      expect.truthy(f == "sweep.json" or f == "table.md" or f:match("^runs/[^/]+/[^/]+/summary%.json$")
        or f:match("^runs/[^/]+/[^/]+/best_kernel%.py$"), "packed only what travels: " .. f)
    end
    expect.truthy(runs >= 3, "every finished run packed")

    -- the pack moved (carried to another machine), resumed there with another database: the
    -- rest finishes
    local moved = dir .. "/carried"
    expect.eq(assert(proc.run({ "mv", pack, moved })).code, 0)
    pack = moved
    local resume = { "--resume", pack, "--kernelbench", KB, "--db", dir .. "/b.db" }
    local r
    for _ = 1, 3 do  -- a loaded CPU may refuse a timing it cannot trust; resuming again is the user's answer
      r = sweep.check_exit(sweep.spawn_sweep(resume, env):wait(900), pack)
      if sweep.finished(pack) >= #PROBLEMS then break end
    end
    expect.match(r.stderr, "resumed: ")
    local s = sweep.sweep_json(pack)
    expect.eq(s.aggregate.finished, #PROBLEMS, "every problem finished")
    done, all = done_rows(assert(fs.read(pack .. "/table.md")))
    expect.eq(done, #PROBLEMS)

    -- fast_p by hand, from the runs' summaries (not from the table's code)
    local count = {}
    for _, rel in ipairs(PROBLEMS) do
      local level, name = tonumber(rel:match("^level(%d+)/")), rel:match("([^/]+)%.py$")
      local run = assert(fs.list(pack .. "/runs/" .. name))[1]
      local sm = json.decode(assert(fs.read(pack .. "/runs/" .. name .. "/" .. run .. "/summary.json")))
      local c = count[level] or { n = 0, measured = {}, eager = { [0] = 0, [1] = 0 }, compile = { [0] = 0, [1] = 0 } }
      count[level] = c
      c.n = c.n + 1
      for _, b in ipairs({ "eager", "compile" }) do
        local x = sm["speedup_vs_" .. b]
        if sm.verified == true and type(x) == "number" then
          c.measured[b] = true
          for _, q in ipairs({ 0, 1 }) do if x > q then c[b][q] = c[b][q] + 1 end end
        end
      end
    end
    local text = fs.read(pack .. "/table.md")
    for _, l in ipairs(s.levels_aggregate.levels) do
      local c = count[l.level]
      expect.eq(l.problems, c.n)
      local cells = {}
      for _, b in ipairs({ "eager", "compile" }) do
        for _, q in ipairs({ 0, 1 }) do
          local want = c.measured[b] and c[b][q] / c.n or json.null
          expect.eq(l.fast_p[b][tostring(q)], want, string.format("level %d fast_%d vs %s", l.level, q, b))
          cells[#cells + 1] = want == json.null and "%-" or string.format("%.0f%%%%", 100 * want)
        end
      end
      expect.match(text, string.format("\n| %d | %d | %d | %%d+ | %%d+ | %s |", l.level, c.n, c.n, table.concat(cells, " | ")),
        "level " .. l.level .. "'s row of table.md")
    end
    -- the problems finished before the pack kept their run time
    for _, row_ in ipairs(s.results) do expect.truthy(row_.problem_s > 0, row_.name .. " has its run time") end
  end, { timeout = 1100 })
end)
