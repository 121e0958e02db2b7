-- A best kernel that works only at the problem's shapes says so wherever it is shown (issue 52
-- item 5): end to end on the CPU, agents/beam.lua starts from a kernel that keeps the first
-- call's shape (tests/fixtures/agent/cpu/shape_cached.py) and stops after the start (--rounds 0,
-- no LLM: the confirmation is what is under test). The evaluator's resized problem fails it;
-- the run's last line, report.html, the bench table (agents/bench.lua on the run folder) and the
-- sweep table (its figures from the run's summary.json) name the sizes it fails at, and
-- --require-generalize still refuses it. Needs a python with torch (KAGENT_PYTHON).
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs, json, proc = kagent.fs, kagent.json, kagent.proc
local fake = require("fake_session")
local figures = require("agents.tools.sweep.figures")
local cpu = fake.cpu()

local LABEL = "only at the problem's shapes: fails at batch_size=3, dim1=17, dim2=17"
local REASON = "shape '%[4, 16, 32, 32%]' is invalid"

local function run_dir(out)
  for _, n in ipairs(fs.list(out) or {}) do
    if fs.is_dir(out .. "/" .. n) then return out .. "/" .. n end
  end
end

local function beam(dir, extra)
  local argv = { "--problem", cpu.problem, "--kernel", cpu.fx .. "shape_cached.py", "--dtype", "fp32",
    "--rounds", "0", "--devices", "cpu", "--out", dir .. "/runs" }
  for _, a in ipairs(extra or {}) do argv[#argv + 1] = a end
  return fake.run_agent("beam.lua", argv, cpu.env(dir), 600)
end

local function pat(text) return (text:gsub("%p", "%%%0")) end

-- the run every place below reads, made once for the file
local shared
local function the_run()
  if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
  if shared then return shared end
  local dir = spec.tmpdir("agent-shapes")
  local r = beam(dir)
  if r.code ~= 0 then error("beam.lua exited " .. r.code .. "\n" .. r.stderr:sub(-3000)) end
  local rd = assert(run_dir(dir .. "/runs"), "a run folder")
  shared = { r = r, rd = rd, dir = dir, s = json.decode(fs.read(rd .. "/summary.json")) }
  return shared
end

describe("a best kernel that works only at the problem's shapes", function()
  it("says so on the last line: the label on the headline, the evaluator's reason under it", function()
    local t = the_run()
    local out = t.r.stdout .. t.r.stderr
    expect.match(out, "confirmed best [%d.]+ ms %([^)]*%), " .. pat(LABEL) .. ", after 0 round")
    expect.match(out, REASON)
    expect.match(out, "%-%-require%-generalize refuses such a kernel")
    expect.eq(t.s.generalizes, "no")
    expect.eq(t.s.generalization[1].sizes.batch_size, 3, "summary.json keeps the evaluator's record")
  end)

  it("says so in report.html", function()
    local t = the_run()
    expect.match(fs.read(t.rd .. "/report.html"), "other shapes</div><div><span class=\"err\">" .. pat(LABEL))
  end)

  it("says so in the bench table (agents/bench.lua on the run folder checks it resized)", function()
    local t = the_run()
    local b = proc.run({ kagent.exe, "--env-file", "/dev/null", kagent.root .. "/agents/bench.lua", t.rd, "--devices", "cpu",
      "--markdown" }, { cwd = kagent.root, env = cpu.env(t.dir), timeout = 600 })
    expect.eq(b.code, 0, b.stderr)
    expect.match(b.stdout, "| yes, yes %(" .. pat(LABEL) .. "%) |")
    expect.match(b.stdout, "optimized: " .. pat(LABEL) .. " %(RuntimeError: " .. REASON)
  end)

  it("says so in the sweep table (its figures from the run's summary.json)", function()
    local t = the_run()
    local row = figures.row({ name = "rmsnorm_small" }, t.s, { status = "done", launches = {} })
    expect.match(figures.table_text({ row }, figures.aggregate({ row })), "| rmsnorm_small | done | yes %("
      .. pat(LABEL) .. "%) |")
  end)

  it("is still refused with --require-generalize", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir("agent-shapes-require")
    local r = beam(dir, { "--require-generalize" })
    expect.truthy(r.code ~= 0, "refused")
    expect.match(r.stderr, "EGENERALIZE: the kernel fails on the problem resized")
  end)
end)
