-- kagent.path: the user's folder first, then kagent.root; a user's file shadows the shipped one
-- for the script argument, require(), kagent.prompt and the skill loader. Each case runs a fresh
-- kagent-rt with its own KAGENT_HOME (the path is computed at start).
local fs, json, proc = kagent.fs, kagent.json, kagent.proc
local exe = spec.build_dir .. "/kagent-rt"

-- run(env, argv, cwd) -> wait table of `kagent-rt --env-file /dev/null argv...`
local function run(env, argv, cwd)
  local cmd = { exe, "--env-file", "/dev/null" }
  for _, a in ipairs(argv) do cmd[#cmd + 1] = a end
  env.KAGENT_ROOT = env.KAGENT_ROOT or false
  return assert(proc.run(cmd, { env = env, cwd = cwd, timeout = 60 }))
end

-- a script in `dir` that prints one JSON line from `body` (a Lua expression)
local function probe(dir, body)
  local path = fs.join(dir, "probe.lua")
  fs.write(path, "print(kagent.json.encode(" .. body .. "))\n")
  return path
end

describe("kagent.path", function()
  it("is $KAGENT_HOME, then kagent.root", function()
    local d = spec.tmpdir("path")
    local r = run({ KAGENT_HOME = d .. "/home" }, { probe(d, "{ path = kagent.path, root = kagent.root }") })
    expect.eq(r.code, 0, r.stderr)
    local got = json.decode(r.stdout)
    expect.same(got.path, { d .. "/home", spec.root })
    expect.eq(got.root, spec.root)
  end)

  it("falls back to $XDG_DATA_HOME/kagent-rt, then ~/.local/share/kagent-rt", function()
    local d = spec.tmpdir("path-xdg")
    local body = "kagent.path[1]"
    local r = run({ KAGENT_HOME = false, XDG_DATA_HOME = d .. "/xdg" }, { probe(d, body) })
    expect.eq(json.decode(r.stdout), d .. "/xdg/kagent-rt")
    r = run({ KAGENT_HOME = false, XDG_DATA_HOME = false, HOME = d }, { probe(d, body) })
    expect.eq(json.decode(r.stdout), d .. "/.local/share/kagent-rt")
  end)
end)

describe("the search path", function()
  -- a user folder with a skill that shadows a shipped one, a new skill, a prompt and a role
  local function user_home()
    local d = spec.tmpdir("user")
    local home = d .. "/home"
    fs.mkdir_p(home .. "/skills")
    fs.mkdir_p(home .. "/prompts")
    fs.mkdir_p(home .. "/agents/roles")
    fs.mkdir_p(home .. "/agents/mine")
    fs.write(home .. "/skills/coalescing.lua", 'return { name = "coalescing", category = "user", intent = "mine",'
      .. ' applies = function() return 1 end, expected = {}, avoid = {} }\n')
    fs.write(home .. "/skills/zz_user.lua", 'return { name = "zz_user", category = "user", intent = "mine",'
      .. ' applies = function() return nil end, expected = {}, avoid = {} }\n')
    fs.write(home .. "/prompts/reflect.md", "user prompt {{x}}\n")
    fs.write(home .. "/agents/roles/judge.lua", 'return { who = "user judge" }\n')
    fs.write(home .. "/agents/mine/hello.lua", 'print("hello from " .. kagent.script)\n')
    return d, home
  end

  it("resolves files and lists a folder with the user's files first", function()
    local d, home = user_home()
    local r = run({ KAGENT_HOME = home }, { probe(d, [[{
      reflect = kagent.resolve("prompts/reflect.md"), diagnose = kagent.resolve("prompts/diagnose.md"),
      none = kagent.resolve("prompts/none.md") or false, skills = kagent.files("skills", ".lua") }]]) })
    expect.eq(r.code, 0, r.stderr)
    local got = json.decode(r.stdout)
    expect.eq(got.reflect, home .. "/prompts/reflect.md")
    expect.eq(got.diagnose, spec.root .. "/prompts/diagnose.md")
    expect.eq(got.none, false)
    local by_name = {}
    for _, p in ipairs(got.skills) do by_name[fs.basename(p)] = p end
    expect.eq(by_name["coalescing.lua"], home .. "/skills/coalescing.lua", "the user's skill shadows the shipped one")
    expect.eq(by_name["zz_user.lua"], home .. "/skills/zz_user.lua")
    expect.eq(by_name["fusion.lua"], spec.root .. "/skills/fusion.lua")
    expect.eq(#got.skills, #fs.list(spec.root .. "/skills") + 1)
  end)

  it("is used by require, kagent.prompt and the skill loader", function()
    local d, home = user_home()
    local r = run({ KAGENT_HOME = home }, { probe(d, [[(function()
      local skills = require("agents.lib.skills").load()
      local found = {}
      for _, s in ipairs(skills) do found[s.name] = s.category end
      return { judge = require("agents.roles.judge").who, prompt = kagent.prompt.render("reflect", { x = 1 }),
        coalescing = found.coalescing, zz_user = found.zz_user, n = #skills } end)()]]) })
    expect.eq(r.code, 0, r.stderr)
    local got = json.decode(r.stdout)
    expect.eq(got.judge, "user judge")
    expect.eq(got.prompt, "user prompt 1\n")
    expect.eq(got.coalescing, "user")
    expect.eq(got.zz_user, "user")
  end)

  it("finds a relative script that is not a file here, from any folder", function()
    local d, home = user_home()
    local r = run({ KAGENT_HOME = home }, { "agents/mine/hello.lua" }, d)
    expect.eq(r.code, 0, r.stderr)
    expect.eq(r.stdout, "hello from " .. home .. "/agents/mine/hello.lua\n")
    r = run({ KAGENT_HOME = home }, { "agents/beam.lua", "--help" }, d)
    expect.eq(r.code, 0, r.stderr)
    expect.match(r.stdout .. r.stderr, "%-%-problem")
    -- a file in the current folder wins over the search path
    fs.mkdir_p(d .. "/agents/mine")
    fs.write(d .. "/agents/mine/hello.lua", 'print("local")\n')
    r = run({ KAGENT_HOME = home }, { "agents/mine/hello.lua" }, d)
    expect.eq(r.stdout, "local\n")
  end)

  it("names where it looked when the script is nowhere", function()
    local d = spec.tmpdir("missing")
    local r = run({ KAGENT_HOME = d .. "/home" }, { "agents/no_such_agent.lua" }, d)
    expect.eq(r.code, 1)
    expect.match(r.stderr, "cannot open agents/no_such_agent%.lua: no such file here nor in " .. d:gsub("%p", "%%%0") .. "/home, ")
  end)
end)

describe("log colours", function()
  -- spdlog colours only a terminal in `auto`; `always` forces them, NO_COLOR only changes `auto`
  local function warn_line(env, color)
    local d = spec.tmpdir("color")
    local script = d .. "/warn.lua"
    fs.write(script, 'kagent.log.warn("w")\n')
    local argv = { "--color", color, script }
    return run(env, argv).stderr
  end

  it("are on with --color always, off with never, and NO_COLOR does not override always", function()
    expect.match(warn_line({ NO_COLOR = false }, "always"), "\27%[")
    expect.no_match(warn_line({ NO_COLOR = false }, "never"), "\27[")
    expect.match(warn_line({ NO_COLOR = "1" }, "always"), "\27%[")
  end)

  it("are off under `script -c` (a terminal) when NO_COLOR is set", function()
    if not fs.exists("/usr/bin/script") then skip("no /usr/bin/script to give kagent-rt a terminal") end
    local d = spec.tmpdir("color-tty")
    fs.write(d .. "/warn.lua", 'kagent.log.warn("w")\n')
    local cmd = exe .. " --env-file /dev/null " .. d .. "/warn.lua"
    local on = assert(proc.run({ "script", "-qec", cmd, "/dev/null" }, { env = { NO_COLOR = false }, timeout = 30 }))
    local off = assert(proc.run({ "script", "-qec", cmd, "/dev/null" }, { env = { NO_COLOR = "1" }, timeout = 30 }))
    expect.match(on.stdout, "\27%[", "coloured on a terminal")
    expect.no_match(off.stdout, "\27[", "NO_COLOR=1")
    expect.match(off.stdout, "w")
  end)
end)
