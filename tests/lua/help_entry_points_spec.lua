-- kagent-rt --help names every entry point (agents/*.lua) with one line each, read from the
-- entry point's own first line ("-- agents/NAME.lua: SUMMARY."), so there is no second list to
-- keep: a new entry point appears by being there.
local fs, proc = kagent.fs, kagent.proc
local BIN = (os.getenv("KAGENT_BUILD_DIR") or (kagent.root .. "/build")) .. "/kagent-rt"

describe("kagent-rt --help", function()
  it("lists every agents/*.lua with the summary of its first line", function()
    local r = assert(proc.run({ BIN, "--env-file", "/dev/null", "--help" }, { timeout = 60 }))
    expect.eq(r.code, 0, r.stderr)
    local names = {}
    for _, f in ipairs(assert(fs.list(kagent.root .. "/agents"))) do
      if f:match("%.lua$") then names[#names + 1] = f:gsub("%.lua$", "") end
    end
    expect.truthy(#names >= 12, "the entry points: " .. table.concat(names, ", "))
    for _, name in ipairs(names) do
      local first = assert(fs.read(kagent.root .. "/agents/" .. name .. ".lua")):match("^([^\n]*)")
      local summary = first:match("^%-%- agents/" .. name .. "%.lua: (.+)%.$")
      expect.truthy(summary, "agents/" .. name .. ".lua's first line is its one-line summary, ending with a period: " .. first)
      expect.truthy(#first <= 100, "a summary that fits a line: " .. first)
      if summary then
        expect.truthy(r.stdout:find("\n  agents/" .. name .. ".lua +" .. summary:gsub("%p", "%%%0") .. "\n"),
          "--help names agents/" .. name .. ".lua with its summary:\n" .. r.stdout)
      end
    end
  end)

  it("the README names what a newcomer looks for and --help lists", function()
    local readme = assert(fs.read(kagent.root .. "/README.md"))
    for _, what in ipairs({ "agents/integrate.lua", "--no-llm", "--tolerance", "kagent-eval check", "kagent-rt --help" }) do
      expect.truthy(readme:find(what, 1, true), "README.md mentions " .. what)
    end
  end)
end)
