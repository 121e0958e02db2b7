-- A memory database with a damaged page stops a run before any work: one line naming the file
-- and what SQLite found, exit status 2 (before, it was a warning and the run went on without
-- what the page held). The run needs no torch: it stops before the evaluator starts.
local fs, proc, mem = kagent.fs, kagent.proc, kagent.mem

local function run_beam(env)
  local cmd = { "/proc/self/exe", "--env-file", "/dev/null", kagent.root .. "/agents/beam.lua",
    "--problem", kagent.root .. "/examples/problems/rmsnorm_small.py", "--devices", "cpu", "--rounds", "1" }
  return assert(proc.run(cmd, { env = env, timeout = 120 }))
end

describe("a damaged memory database", function()
  it("stops the run before any work with one clear line and exit status 2", function()
    local dir = spec.tmpdir("db-damage")
    local path = dir .. "/mem.db"
    local db = assert(mem.open(path))
    -- enough lessons to fill several pages, so one in the middle can be damaged
    for i = 1, 400 do
      assert(db:exec("INSERT INTO lessons (text, created) VALUES (?, ?)", { string.rep("lesson " .. i .. " ", 40), i }))
    end
    db:close()
    local data = assert(fs.read(path))
    local page = 4096
    expect.truthy(#data > 8 * page, "the database has pages to damage (" .. #data .. " bytes)")
    -- overwrite the fifth page with bytes no page holds
    fs.write(path, data:sub(1, 4 * page) .. string.rep("\255", page) .. data:sub(5 * page + 1))
    local r = run_beam({ KAGENT_DB = path, KAGENT_PYTHON = "/nonexistent/python3", ANTHROPIC_API_KEY = false,
      OPENAI_API_KEY = false, KAGENT_LLM_URL = false, KAGENT_MODEL = false })
    expect.eq(r.code, 2, r.stderr)
    expect.match(r.stderr, "the memory database " .. path:gsub("%p", "%%%0") .. " is damaged %(")
    expect.no_match(r.stderr, "evaluator")
  end)
end)
