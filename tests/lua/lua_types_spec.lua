-- The LuaCATS annotations (types/) against the contract (docs/lua-api.md) and the runtime: they
-- cannot drift, because the annotations are generated from the docs and checked here, and the
-- docs are checked against what the modules really export. Also scans agents/, skills/ and
-- examples/ for kagent.* names that are not annotated (what lua-language-server would call an
-- undefined field; tests/tools/luals_check.sh runs the server itself where it is installed).
local fs = kagent.fs
local gen = dofile(fs.join(spec.root, "scripts/gen_lua_types.lua"))
local api = gen.parse(assert(fs.read(fs.join(spec.root, "docs/lua-api.md"))))

local function keys(t)
  local out = {}
  for k in pairs(t) do out[#out + 1] = k end
  table.sort(out)
  return out
end

-- names annotated in types/: "mod.fn", "obj:method", "mod.field"
local function annotated()
  local names = {}
  local receiver = {} -- object class -> the receiver the docs write ("kagent.proc.Process" -> "p")
  for recv, class in pairs(gen.OBJECTS) do receiver[class] = recv end
  local function scan(text)
    for recv, sep, name in text:gmatch("\nfunction ([%w_]+)([.:])([%w_]+)%(") do names[recv .. sep .. name] = true end
    for recv, name in text:gmatch("\n([%w_]+)%.([%w_]+) = nil") do names[recv .. "." .. name] = true end
    -- an object's fields: the ---@field lines right after its ---@class line
    local class
    for line in text:gmatch("[^\n]+") do
      local field = line:match("^%-%-%-@field ([%w_]+) ")
      if field and class and receiver[class] then names[receiver[class] .. "." .. field] = true end
      class = line:match("^%-%-%-@class ([%w_.]+)") or (field and class) or nil
    end
  end
  for _, n in ipairs(fs.list(fs.join(spec.root, "types/kagent"))) do
    scan("\n" .. fs.read(fs.join(spec.root, "types/kagent", n)))
  end
  scan("\n" .. fs.read(fs.join(spec.root, "types/kagent.lua")))
  return names
end

describe("types/", function()
  it("is what scripts/gen_lua_types.lua writes from docs/lua-api.md", function()
    local files = gen.render(api)
    for rel, text in pairs(files) do
      expect.truthy(fs.read(fs.join(spec.root, "types", rel)) == text,
        "types/" .. rel .. " is stale: run `build/kagent-rt scripts/gen_lua_types.lua`")
    end
    for _, n in ipairs(fs.list(fs.join(spec.root, "types/kagent"))) do
      expect.truthy(files["kagent/" .. n], "types/kagent/" .. n .. " has no module in the docs")
    end
  end)

  it("annotates every documented function and field, and nothing else", function()
    local have = annotated()
    local documented = {}
    for k in pairs(api.functions) do documented[k] = true end
    for k in pairs(api.fields) do documented[k] = true end
    local missing, extra = {}, {}
    for _, k in ipairs(keys(documented)) do if not have[k] then missing[#missing + 1] = k end end
    for _, k in ipairs(keys(have)) do if not documented[k] then extra[#extra + 1] = k end end
    expect.same(missing, {}, "documented in docs/lua-api.md but not annotated")
    expect.same(extra, {}, "annotated but not documented")
    expect.truthy(#keys(api.functions) > 100, "the parser found the API (" .. #keys(api.functions) .. " functions)")
  end)
end)

describe("docs/lua-api.md", function()
  -- one live object of each kind the docs name, to look their methods up
  local function objects()
    local db = assert(kagent.mem.open(":memory:"))
    local p = assert(kagent.proc.spawn({ "true" }))
    p:wait(5)
    return { t = kagent.task.spawn(function() end), sem = kagent.task.semaphore(1),
      cond = kagent.task.condition(), p = p,
      pool = kagent.gpu.pool({ devices = "cpu" }), db = db }
  end

  it("names only functions and fields the runtime has", function()
    local objs = objects()
    local absent = {}
    for key, f in pairs(api.functions) do
      local owner = f.recv == "kagent" and kagent or objs[f.recv] or kagent[f.recv]
      if type(owner[f.name]) ~= "function" then absent[#absent + 1] = key end
    end
    for key, f in pairs(api.fields) do
      local owner = f.recv == "kagent" and kagent or objs[f.recv] or kagent[f.recv]
      -- fields the script sets (t.name) or that start nil are not checked for a value
      if f.recv ~= "t" and owner[f.name] == nil then absent[#absent + 1] = key end
    end
    table.sort(absent)
    objs.db:close()
    expect.same(absent, {}, "documented but missing at run time")
  end)

  it("documents every public function of every module", function()
    local undocumented = {}
    for _, m in ipairs(gen.MODULES) do
      for name, v in pairs(kagent[m]) do
        if type(v) == "function" and not name:match("^_") and not api.functions[m .. "." .. name] then
          undocumented[#undocumented + 1] = m .. "." .. name
        end
      end
    end
    table.sort(undocumented)
    expect.same(undocumented, {}, "exported but not in docs/lua-api.md")
  end)
end)

describe("agents/, skills/, examples/", function()
  -- every kagent.<mod>.<name>, and <alias>.<name> where `local <alias> = require("kagent.<mod>")`
  -- or `= kagent.<mod>`, must be annotated
  local function lua_files(dir, out)
    for _, n in ipairs(fs.list(dir) or {}) do
      local p = fs.join(dir, n)
      if fs.is_dir(p) then lua_files(p, out) elseif n:match("%.lua$") then out[#out + 1] = p end
    end
    return out
  end

  it("use only annotated kagent names", function()
    local have = annotated()
    local modules = {}
    for _, m in ipairs(gen.MODULES) do modules[m] = true end
    local unknown, seen = {}, 0
    for _, dir in ipairs({ "agents", "skills", "examples" }) do
      for _, path in ipairs(lua_files(fs.join(spec.root, dir), {})) do
        local raw = fs.read(path)
        local alias = {}
        for a, m in raw:gmatch("local%s+([%w_]+)%s*=%s*require%(?%s*[\"']kagent%.([%w_]+)[\"']") do alias[a] = m end
        for a, m in raw:gmatch("local%s+([%w_]+)%s*=%s*kagent%.([%w_]+)%f[^%w_.]") do
          if modules[m] then alias[a] = m end
        end
        -- code only: names inside strings ("runs/kagent.db") and comments are not uses
        local src = "\n" .. raw:gsub("%-%-%[%[.-%]%]", ""):gsub('"[^"\n]*"', '""'):gsub("'[^'\n]*'", "''"):gsub("%-%-[^\n]*", "")
        local function check(m, name)
          seen = seen + 1
          if not have[m .. "." .. name] then unknown[#unknown + 1] = path:sub(#spec.root + 2) .. ": " .. m .. "." .. name end
        end
        for m, name in src:gmatch("kagent%.([%w_]+)%.([%w_]+)") do
          if have["kagent." .. m] == nil and m ~= "native" then check(m, name) end
        end
        for a, m in pairs(alias) do
          for name in src:gmatch("[^%w_.:]" .. a .. "%.([%w_]+)") do check(m, name) end
        end
        for name in src:gmatch("[^%w_.:]kagent%.([%w_]+)") do
          seen = seen + 1
          if not have["kagent." .. name] and not kagent[name] then unknown[#unknown + 1] = path:sub(#spec.root + 2) .. ": kagent." .. name end
        end
      end
    end
    expect.truthy(seen > 50, "found kagent.* uses to check (" .. seen .. ")")
    expect.same(unknown, {}, "kagent names used but not annotated")
  end)
end)
