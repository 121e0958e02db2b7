-- The spec runner itself (tests/lua/run.lua): after_all runs once every case ran, in order, and a
-- teardown that fails fails the file.
local proc, fs = kagent.proc, kagent.fs

local function run_spec(text)
  local path = spec.tmpdir("runner") .. "/planted_spec.lua"
  assert(fs.write(path, text))
  return assert(proc.run({ spec.build_dir .. "/kagent-rt", "--log-level", "error", spec.root .. "/tests/lua/run.lua", path },
    { timeout = 60 }))
end

describe("the spec runner's after_all", function()
  it("runs after every case, in the order registered", function()
    local r = run_spec([[
describe("d", function()
  after_all(function() print("teardown one") end)
  it("first", function() print("case first") end)
  after_all(function() print("teardown two") end)
  it("second", function() print("case second") end)
end)]])
    expect.eq(r.code, 0, r.stdout .. r.stderr)
    local order = {}
    for what in r.stdout:gmatch("(%a+ %a+)\n") do
      if what:find("^case") or what:find("^teardown") then order[#order + 1] = what end
    end
    expect.same(order, { "case first", "case second", "teardown one", "teardown two" }, r.stdout)
  end)

  it("fails the file when a teardown raises, naming it", function()
    local r = run_spec([[
describe("d", function()
  it("passes", function() end)
  after_all(function() error("server would not stop") end)
end)]])
    expect.eq(r.code, 1, r.stdout)
    expect.match(r.stdout, "FAIL after_all of d")
    expect.match(r.stdout, "server would not stop")
    expect.match(r.stdout, "1 passed, 1 failed")
  end)
end)
