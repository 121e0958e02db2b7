-- scripts/demo.sh in CPU mode, as a newcomer runs it from a fresh folder without an LLM: it ends
-- with one line that says what it showed, and on its CPU problem (KernelBench's diag(A) @ B, whose
-- eager forward multiplies by a dense diagonal matrix) that is a confirmed kernel faster than eager,
-- by a margin (about 100x) no load on the machine closes. Skipped where a GPU is found (the demo
-- then runs its GPU problem: tests/gpu/).
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs, json, proc = kagent.fs, kagent.json, kagent.proc
local fake = require("fake_session")

local function has_gpu()
  local r = proc.run({ "sh", "-c", "command -v nvidia-smi >/dev/null && nvidia-smi -L" }, { timeout = 60 })
  return r and r.code == 0
end

describe("scripts/demo.sh on the CPU", function()
  it("ends with a confirmed kernel faster than eager, said in one line", function()
    if not fake.cpu().have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    if has_gpu() then skip("a GPU is here: the demo runs its GPU problem") end
    local dir = spec.tmpdir("demo-cpu")
    local env = fake.cpu().env(dir)  -- no LLM: the LLM-free tuner, as on a fresh clone
    env.KAGENT_BIN = false
    local r = assert(proc.run({ "bash", kagent.root .. "/scripts/demo.sh", "--rounds", "1" },
      { cwd = dir, env = env, timeout = 900 }))
    if r.code ~= 0 then error("demo.sh exited " .. r.code .. "\n" .. r.stderr:sub(-3000) .. r.stdout:sub(-1000)) end
    local lines = {}
    for l in (r.stdout .. "\n" .. r.stderr):gmatch("[^\n]+") do lines[#lines + 1] = l end
    local verdicts = {}
    for _, l in ipairs(lines) do if l:match("^demo: the confirmed kernel") or l:match("^demo: no confirmed") then verdicts[#verdicts + 1] = l end end
    expect.eq(#verdicts, 1, "one verdict line:\n" .. r.stdout .. r.stderr:sub(-1500))
    local last = r.stdout:match("([^\n]+)\n*$")
    expect.eq(last, verdicts[1], "the demo ends with it")
    local runs = {}
    for _, n in ipairs(fs.list(dir .. "/runs") or {}) do if fs.is_dir(dir .. "/runs/" .. n) then runs[#runs + 1] = n end end
    expect.eq(#runs, 1, "one run under ./runs")
    local s = json.decode(assert(fs.read(dir .. "/runs/" .. runs[1] .. "/summary.json")))
    expect.eq(s.verified, true, "a confirmed kernel: " .. tostring(s.error))
    expect.truthy(type(s.speedup_vs_eager) == "number" and s.speedup_vs_eager > 1,
      "faster than eager: " .. tostring(s.speedup_vs_eager))
    expect.match(last, "^demo: the confirmed kernel runs " .. string.format("%.2f", s.speedup_vs_eager):gsub("%.", "%%.")
      .. "x as fast as PyTorch eager")
    expect.match(last, "runs/" .. runs[1]:gsub("%p", "%%%0") .. "/report%.html")
  end, { timeout = 900 })
end)
