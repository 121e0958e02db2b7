-- --config FILE (agents/run/config.lua): the YAML (kagent.yaml) and JSON it reads, KernelAgent's
-- configs as they are written (tests/fixtures/ka_config/), long option names and
-- KernelAgent's keys, the command line winning, one line for a bad file, and the merged options
-- kept in the run folder (state.json) so that --resume uses them without the file.
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs, json = kagent.fs, kagent.json
local config = require("agents.run.config")
local run_lib = require("agents.run")
local session = require("fake_session")
local cpu = session.cpu()

local KA_YAML = [[
# KernelAgent's examples/configs/beam_search.yaml, as it is written there
strategy: beam_search
num_workers: 4
strategy_config:
  num_top_kernels: 3
  num_bottlenecks: 4
openai_model: claude-opus-4.5
high_reasoning_effort: true

# Worker configuration
benchmark_warmup: 25
gpu_name: "NVIDIA H100 NVL 94GB"
]]

local KA_FIXTURES = kagent.root .. "/tests/fixtures/ka_config/"

local function write(dir, name, text)
  local path = dir .. "/" .. name
  assert(fs.write(path, text))
  return path
end

local function parse(argv) return run_lib.parse("agents/beam.lua", argv) end

describe("--config", function()
  it("reads YAML (kagent.yaml): scalars, quotes, comments, sections; errors name the line and column", function()
    local dir = spec.tmpdir("config-read")
    local t = assert(config.read(write(dir, "ka.yaml", KA_YAML)))
    expect.eq(t.strategy, "beam_search")
    expect.eq(t["strategy_config.num_top_kernels"], 3)
    expect.eq(t.high_reasoning_effort, true)
    expect.eq(t.gpu_name, "NVIDIA H100 NVL 94GB")
    local path = write(dir, "x.yaml", "rounds: 2\nbeam: [1, 2\n")
    local _, why = config.read(path)
    expect.eq(why, path .. ":3:1: end of sequence flow not found (not valid YAML)")
    path = write(dir, "y.yaml", "rounds: 2\n  beam: 3\n")
    _, why = config.read(path)
    expect.eq(why, path .. ":2:7: illegal map value (not valid YAML)")
    _, why = config.read(write(dir, "z.yaml", "- rounds\n"))
    expect.match(why, "z%.yaml: expected 'option: value' lines at the top level, found a list")
    expect.same(config.read(write(dir, "empty.yaml", "# nothing set\n")), {})
  end)

  it("loads KernelAgent's beam_search_diverse.yaml as written: models: -> --model worker=A,B,C", function()
    local k = assert(parse({ "--problem", "p.py", "--config", KA_FIXTURES .. "beam_search_diverse.yaml" }))
    expect.eq(k.policy, "beam"); expect.eq(k.beam, 3, "candidate_pool_size"); expect.eq(k.directions, 2)
    expect.same(k.model, { "model-a", "worker=model-a,model-b,model-c" })
    local plan = assert(require("agents.run.models").parse(k.model))
    expect.same(plan.by_role.worker, { "model-a", "model-b", "model-c" }, "the worker mixture, in turns")
    local dir = spec.tmpdir("config-models")
    local _, why = config.to_argv(assert(config.read(write(dir, "m.yaml", "strategy_config:\n  models:\n    - {name: x}\n"))),
      require("agents.run.options"), "m.yaml")
    expect.match(why, "m%.yaml: strategy_config%.models: .* is not a model name")
  end)

  it("loads KernelAgent's nvidia.yaml as written: platform: is named once as ignored", function()
    local k = assert(parse({ "--problem", "p.py", "--config", KA_FIXTURES .. "nvidia.yaml" }))
    expect.eq(k.policy, "greedy"); expect.eq(k.beam, 1); expect.eq(k.directions, 2)
    local dir = spec.tmpdir("config-platform")
    -- a problem file that is not there: the options (and the note) come first, then exit 2
    local r = session.run_agent("beam.lua", { "--problem", dir .. "/none.py", "--config",
      KA_FIXTURES .. "nvidia.yaml" }, cpu.env(dir), 60)
    expect.eq(r.code, 2, r.stderr)
    local notes = {}
    for line in r.stderr:gmatch("[^\n]+") do
      if line:find("ignored:", 1, true) then notes[#notes + 1] = line end
    end
    expect.eq(#notes, 1, "one line of ignored keys: " .. r.stderr)
    expect.eq(select(2, notes[1]:gsub("platform", "")), 1, "platform named once: " .. notes[1])
    expect.truthy(notes[1]:find("num_workers", 1, true), notes[1])
    expect.no_match(notes[1], "verifier", "the platform's components are one key")
  end)

  it("takes long option names and KernelAgent's keys; the command line wins", function()
    local dir = spec.tmpdir("config-merge")
    local ours = write(dir, "run.yaml", "rounds: 5\nmax-cv: 0.3\nsol_stop: 80\ndtype: bf16\nrequire-generalize: true\n")
    local o = assert(parse({ "--problem", "p.py", "--config", ours, "--rounds", "2" }))
    expect.eq(o.rounds, 2, "the command line wins")
    expect.eq(o.max_cv, 0.3); expect.eq(o.sol_stop, 80); expect.eq(o.dtype, "bf16"); expect.eq(o.require_generalize, true)
    expect.truthy(o._given.max_cv, "a value from the file counts as given (a --resume keeps it)")
    local ka = write(dir, "ka.yaml", KA_YAML)
    local k = assert(parse({ "--problem", "p.py", "--config", ka }))
    expect.eq(k.policy, "beam"); expect.eq(k.beam, 3); expect.eq(k.directions, 4); expect.same(k.model, { "claude-opus-4.5" }, "as --model, which may be repeated")
    local j = assert(parse({ "--problem", "p.py", "--config",
      write(dir, "run.json", json.encode({ rounds = 4, strategy_config = { num_bottlenecks = 2 } })) }))
    expect.eq(j.rounds, 4); expect.eq(j.directions, 2)
  end)

  it("refuses a bad file in one line: unknown key (did you mean), bad value, unreadable", function()
    local dir = spec.tmpdir("config-bad")
    for _, c in ipairs({
      { "roundz: 3\n", "unknown key 'roundz'; did you mean 'rounds'?" },
      { "rounds: -1\n", "--rounds expects a whole number >= 0, got '-1'" },
      { "dtype: bf17\n", "--dtype must be one of fp32, bf16, fp16" },
      { "resume: x\n", "'resume' cannot be set from a config file" },
      { "rounds: 2\nbeam: [1, 2\n", "bad.yaml:3:1: end of sequence flow not found" },
    }) do
      local path = write(dir, "bad.yaml", c[1])
      local r = session.run_agent("beam.lua", { "--problem", cpu.problem, "--config", path },
        cpu.env(dir), 60)
      expect.eq(r.code, 2, c[1])
      expect.truthy(r.stderr:find(c[2], 1, true), c[1] .. ": " .. r.stderr)
      expect.eq(select(2, r.stderr:gsub("\n", "")), 1, "one line: " .. r.stderr)
    end
    local r = session.run_agent("beam.lua", { "--problem", cpu.problem, "--config", dir .. "/none.yaml" }, cpu.env(dir), 60)
    expect.eq(r.code, 2)
    expect.match(r.stderr, "%-%-config: cannot read ")
  end)

  it("keeps the merged options in the run folder, and --resume uses them without the file", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("config-run")
    local cfg = write(dir, "run.yaml", "rounds: 0\nbeam: 1\ntune-candidates: 3\nbenchmark_warmup: 25\n")
    local r = session.run_agent("beam.lua", { "--problem", cpu.problem, "--kernel", cpu.fx .. "tunable.py",
      "--devices", "cpu", "--config", cfg, "--out", dir .. "/runs" }, cpu.env(dir), 300)
    expect.truthy(r.code == 0 or r.code == 5, "exit " .. r.code .. "\n" .. r.stderr:sub(-2000))
    expect.match(r.stderr, "KernelAgent settings with no counterpart here, ignored: benchmark_warmup")
    local rd = session.newest_run(dir .. "/runs")
    local st = json.decode(assert(fs.read(rd .. "/state.json")))
    expect.eq(st.opts.beam, 1); expect.eq(st.opts.tune_candidates, 3)
    fs.remove(cfg)
    local again = session.run_agent("beam.lua", { "--resume", rd }, cpu.env(dir), 300)
    expect.truthy(again.code == 0 or again.code == 5, "resumed without the file: exit " .. again.code .. "\n" .. again.stderr:sub(-2000))
    st = json.decode(assert(fs.read(rd .. "/state.json")))
    expect.eq(st.opts.beam, 1, "the file's options stay the run's")
  end, { timeout = 300 })
end)
