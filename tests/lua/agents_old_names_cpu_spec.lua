-- A policy written against the module names agents/ had before its floors (agents/lib/promotion,
-- select, expand, search) still runs: the forwarding modules at the old names hand over the
-- new ones and the log says once per name what to require instead (docs/policies.md, "Old
-- module names"). Candidates are pure PyTorch (CPU mode); needs a python with torch.
package.path = kagent.root .. "/tests/fixtures/agent/?.lua;" .. package.path
local fs, json = kagent.fs, kagent.json
local fake = require("fake_session")
local cpu = fake.cpu()

local OLD = { "agents.lib.promotion", "agents.lib.select", "agents.lib.expand", "agents.lib.search" }

-- the shipped tuner policy as a user would have written it before: old names, and a stop rule
-- that takes the default from the driver's module instead of its third argument
local function old_style_policy(dir)
  local src = assert(fs.read(kagent.root .. "/agents/policies/tune.lua"))
  src = src:gsub('require%("agents%.search%.promotion"%)', 'require("agents.lib.promotion")')
  src = src:gsub("function P%.stop%(state, run, default%)", "function P.stop(state, run)")
  src = src:gsub("return default%(state, run%)", 'return require("agents.lib.search").default_stop(state, run)')
  src = 'local _ = { require("agents.lib.select").better, require("agents.lib.expand").expand }\n' .. src
  for _, name in ipairs(OLD) do
    expect.truthy(src:find(name, 1, true), "the policy requires " .. name)
  end
  local path = dir .. "/old_tune.lua"
  fs.write(path, src)
  return path
end

describe("a policy that requires the old module names", function()
  it("runs, and the log says once per name what to require instead", function()
    if not cpu.have_torch() then skip("no torch for " .. spec.python .. " (set KAGENT_PYTHON)") end
    local dir = spec.tmpdir(string.format("old-names-%06d", math.floor((kagent.time.now() % 1) * 1e6)))
    local env = { KAGENT_PYTHON = spec.python, KAGENT_DB = dir .. "/mem.db", KAGENT_PROGRESS = "lines",
      ANTHROPIC_API_KEY = false, OPENAI_API_KEY = false, KAGENT_LLM_URL = false, KAGENT_MODEL = false,
      OPENAI_BASE_URL = false, ANTHROPIC_BASE_URL = false, KAGENT_LLM_CACHE = false }
    local r = fake.run_agent("tune.lua", { "--problem", cpu.problem, "--kernel", cpu.fx .. "tunable.py",
      "--policy", old_style_policy(dir), "--rounds", "1", "--tune-candidates", "1", "--devices", "cpu",
      "--out", dir .. "/runs" }, env, 600)
    if r.code ~= 0 then error("tune.lua exited " .. r.code .. "\n" .. r.stderr:sub(-3000)) end
    local run_dir = fake.newest_run(dir .. "/runs")
    local s = run_dir and json.decode(fs.read(run_dir .. "/summary.json") or "null")
    for _, name in ipairs(OLD) do
      local pattern = 'require%("' .. name:gsub("%.", "%%.") .. '"%) is deprecated: the module is now "agents%.'
      local _, count = r.stderr:gsub(pattern, "")
      expect.eq(count, 1, "one deprecation line for " .. name .. "\n" .. r.stderr:sub(-2000))
    end
    assert(s, "no summary.json")
    expect.eq(s.status, "done", "the run finished")
    expect.eq(s.policy, dir .. "/old_tune.lua", "with the old-style policy")
  end, { timeout = 900 })
end)
