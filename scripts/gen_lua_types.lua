-- Writes the LuaCATS annotations of the kagent.* API (types/kagent.lua, types/kagent/<module>.lua)
-- from docs/lua-api.md, the contract, so editors (lua-language-server) know every documented
-- function, field and object method, with its documentation as hover text.
--   kagent-rt scripts/gen_lua_types.lua            rewrite types/ (after editing docs/lua-api.md)
--   kagent-rt scripts/gen_lua_types.lua --check    exit 1, naming the differences, when types/
--                                                  is not what the docs give (a ctest test)
-- Every function written as `mod.fn(...)`/`mod.fn{...}` or `obj:method(...)` anywhere in the
-- docs is annotated, and every field written as `mod.name` in a bullet or table row. Return
-- types come from the docs' "Result types (LuaCATS)" section (its ```lua block of classes,
-- written to types/kagent/results.lua, and its table of function -> returns), the other types
-- from the small tables below (constructors, objects, parameter names); the rest is `any`.
local fs = kagent.fs

local MODULES = { "task", "time", "proc", "json", "yaml", "log", "fs", "prompt", "gpu", "http", "llm", "mem", "secrets" }
local IS_MODULE = {}
for _, m in ipairs(MODULES) do IS_MODULE[m] = true end

-- objects the docs name by a short receiver, and the class each one gets
local OBJECTS = { t = "kagent.task.Task", sem = "kagent.task.Semaphore", cond = "kagent.task.Condition",
  p = "kagent.proc.Process", pool = "kagent.gpu.Pool", db = "kagent.mem.Db" }
local OBJECT_ORDER = { "t", "sem", "cond", "p", "pool", "db" }
local OBJECT_MODULE = { t = "task", sem = "task", cond = "task", p = "proc", pool = "gpu", db = "mem" }
-- functions that return one of those objects
local RETURNS = { ["task.spawn"] = "kagent.task.Task", ["task.current"] = "kagent.task.Task?",
  ["task.semaphore"] = "kagent.task.Semaphore", ["task.condition"] = "kagent.task.Condition",
  ["proc.spawn"] = "kagent.proc.Process?",
  ["gpu.pool"] = "kagent.gpu.Pool", ["mem.open"] = "kagent.mem.Db?" }
local FIELD_TYPES = { ["kagent.version"] = "string", ["kagent.args"] = "string[]",
  ["kagent.script"] = "string", ["kagent.exe"] = "string?", ["kagent.root"] = "string", ["kagent.path"] = "string[]",
  ["p.pid"] = "integer", ["t.name"] = "string?", ["prompt.dirs"] = "string[]",
  ["mem.SCHEMA_VERSION"] = "integer" }
local PARAM_TYPES = { fn = "function", fmt = "string", path = "string", name = "string",
  name_or_path = "string", sql = "string", url = "string", data = "string", key = "string",
  template = "string", label = "string", lang = "string", text = "string", query = "string",
  rel = "string", subdir = "string", suffix = "string", status = "string", argv = "string[]",
  timeout = "number", fd = "integer", id = "integer", run_id = "integer", parent_id = "integer?",
  opts = "table", job = "table", vars = "table", params = "table", fields = "table",
  list = "table", skills = "table[]", row = "table", rows = "table[]", t = "kagent.task.Task" }
local OPTIONAL = { opts = true, timeout = true, params = true, vars = true, label = true,
  lang = true, sig = true, summary = true, device = true, suffix = true }

-- ---- reading the docs ---------------------------------------------------------------------------

-- blocks(text) -> array of strings: bullets with their indented continuation, table rows and
-- paragraphs, outside code fences
local function blocks(text)
  local out, cur, fence = {}, nil, false
  local function flush() if cur then out[#out + 1] = table.concat(cur, "\n"); cur = nil end end
  for line in (text .. "\n"):gmatch("(.-)\n") do
    if line:match("^```") then
      flush(); fence = not fence
    elseif fence then -- skip
    elseif line:match("^%s*$") or line:match("^#") then
      flush()
    elseif line:match("^%- ") or line:match("^|") then
      flush(); cur = { line }
    elseif cur and (line:match("^%s") or not (cur[1]:match("^%- ") or cur[1]:match("^|"))) then
      cur[#cur + 1] = line -- a bullet's indented continuation, or the paragraph going on
    elseif cur then
      flush(); cur = { line }
    else
      cur = { line }
    end
  end
  flush()
  return out
end

local function split_params(inner)
  local out, depth, cur = {}, 0, ""
  for c in inner:gmatch(".") do
    if c == "{" or c == "(" or c == "[" then depth = depth + 1 end
    if c == "}" or c == ")" or c == "]" then depth = depth - 1 end
    if c == "," and depth == 0 then out[#out + 1] = cur; cur = "" else cur = cur .. c end
  end
  if cur:match("%S") then out[#out + 1] = cur end
  for i, p in ipairs(out) do out[i] = p:match("^%s*(.-)%s*$") end
  return out
end

-- params(sig) -> array of {name, type, optional} from "(a, b, ...)" or "{...}"
local function params(sig)
  if sig:sub(1, 1) == "{" then return { { name = "args", type = "table" } } end
  local inner = sig:match("^%((.*)%)") or ""
  local out = {}
  for i, p in ipairs(split_params(inner)) do
    local name = p:match("^([%a_][%w_]*)$")
    if p == "..." then
      out[#out + 1] = { name = "...", type = "any" }
    elseif name then
      out[#out + 1] = { name = name, type = PARAM_TYPES[name] or "any", optional = OPTIONAL[name] }
    else -- a table literal such as {limit=n}
      out[#out + 1] = { name = i == 1 and "args" or "opts", type = "table", optional = i > 1 }
    end
  end
  return out
end

-- results(text) -> the LuaCATS classes of the "Result types" section (its ```lua block) and
-- {"recv.name" -> returns} from its table
local function results(text)
  local section = text:match("\n## Result types[^\n]*\n(.*)$") or ""
  section = section:match("^(.-)\n## ") or section
  local classes = section:match("```lua\n(.-)\n```") or ""
  local returns = {}
  for name, ret in section:gmatch("\n| `([%w_]+[.:][%w_]+)` | `([^`]+)` |") do
    returns[(name:gsub(":", "."))] = (ret:gsub("\\|", "|"))  -- a union's `|`, escaped in the table
  end
  return classes, returns
end

-- parse(text) -> {functions = {key -> entry}, fields = {key -> entry}} keyed "recv.name"/"recv:name"
local function parse(text)
  local functions, fields, order = {}, {}, 0
  local function add(tbl, key, entry)
    if tbl[key] then return end
    order = order + 1
    entry.order = order
    tbl[key] = entry
  end
  for _, block in ipairs(blocks(text)) do
    local listed = block:match("^%- ") or block:match("^|")
    for span in block:gmatch("`([^`]+)`") do
      local recv, sep, names, sig = span:match("^([%a_][%w_]*)([.:])([%w_/]+)%s*([%(%{].*)$")
      if recv and (IS_MODULE[recv] or OBJECTS[recv] or recv == "kagent") and (sep == ":") == (OBJECTS[recv] ~= nil) then
        for name in names:gmatch("[^/]+") do
          add(functions, recv .. sep .. name, { recv = recv, name = name, sep = sep, params = params(sig), doc = block })
        end
      elseif listed then
        local r, name = span:match("^([%a_][%w_]*)%.([%w_]+)$")
        if r and (IS_MODULE[r] or OBJECTS[r] or r == "kagent") and not (r == "kagent" and (IS_MODULE[name] or name == "native")) then
          add(fields, r .. "." .. name, { recv = r, name = name, doc = block })
        end
      end
    end
  end
  for key, f in pairs(fields) do -- a name written both ways is a function
    if functions[key] or functions[f.recv .. ":" .. f.name] then fields[key] = nil end
  end
  local classes, returns = results(text)
  return { functions = functions, fields = fields, classes = classes, returns = returns }
end

-- ---- writing the annotations --------------------------------------------------------------------

local function comment(doc)
  local lines = {}
  for line in (doc .. "\n"):gmatch("(.-)\n") do lines[#lines + 1] = "---" .. line:gsub("^%- ", "", 1) end
  return table.concat(lines, "\n")
end

local function sorted(tbl, pred)
  local out = {}
  for _, e in pairs(tbl) do if pred(e) then out[#out + 1] = e end end
  table.sort(out, function(a, b) return a.order < b.order end)
  return out
end

local function emit_function(out, owner, f, returns)
  out[#out + 1] = comment(f.doc)
  local names = {}
  for _, p in ipairs(f.params) do
    if p.name == "..." then
      out[#out + 1] = "---@param ... any"
    else
      out[#out + 1] = string.format("---@param %s%s %s", p.name, p.optional and "?" or "", p.type)
    end
    names[#names + 1] = p.name
  end
  local ret = RETURNS[f.recv .. "." .. f.name] or (returns or {})[f.recv .. "." .. f.name]
  out[#out + 1] = "---@return " .. (ret or "any")
  out[#out + 1] = string.format("function %s%s%s(%s) end\n", owner, f.sep, f.name, table.concat(names, ", "))
end

local HEADER = "---@meta\n-- Generated from docs/lua-api.md by scripts/gen_lua_types.lua: do not edit; run\n"
  .. "-- `build/kagent-rt scripts/gen_lua_types.lua` after changing the docs.\n"

-- render(api) -> {relative path -> text}
local function render(api)
  local files = {}
  for _, m in ipairs(MODULES) do
    local out = { HEADER }
    out[#out + 1] = string.format("---@class kagent.%s\nlocal %s = {}\n", m, m)
    for _, f in ipairs(sorted(api.fields, function(e) return e.recv == m end)) do
      out[#out + 1] = comment(f.doc)
      out[#out + 1] = string.format("---@type %s\n%s.%s = nil\n", FIELD_TYPES[m .. "." .. f.name] or "any", m, f.name)
    end
    for _, f in ipairs(sorted(api.functions, function(e) return e.recv == m end)) do emit_function(out, m, f, api.returns) end
    for _, recv in ipairs(OBJECT_ORDER) do
      local class = OBJECTS[recv]
      if OBJECT_MODULE[recv] == m then
        out[#out + 1] = string.format("---@class %s", class)
        for _, f in ipairs(sorted(api.fields, function(e) return e.recv == recv end)) do
          out[#out + 1] = string.format("---@field %s %s %s", f.name, FIELD_TYPES[recv .. "." .. f.name] or "any",
            (f.doc:gsub("\n.*", ""):gsub("^%- ", "")))
        end
        out[#out + 1] = string.format("local %s = {}\n", recv)
        for _, f in ipairs(sorted(api.functions, function(e) return e.recv == recv end)) do
          emit_function(out, recv, f, api.returns)
        end
      end
    end
    out[#out + 1] = "return " .. m .. "\n"
    files["kagent/" .. m .. ".lua"] = table.concat(out, "\n")
  end
  local out = { HEADER, "---The kagent-rt scripting API (docs/lua-api.md): a preloaded global." }
  out[#out + 1] = "---@class kagent"
  for _, m in ipairs(MODULES) do out[#out + 1] = string.format("---@field %s kagent.%s", m, m) end
  out[#out + 1] = "kagent = {}\n"
  for _, f in ipairs(sorted(api.fields, function(e) return e.recv == "kagent" end)) do
    out[#out + 1] = comment(f.doc)
    out[#out + 1] = string.format("---@type %s\nkagent.%s = nil\n", FIELD_TYPES["kagent." .. f.name] or "any", f.name)
  end
  for _, f in ipairs(sorted(api.functions, function(e) return e.recv == "kagent" end)) do
    emit_function(out, "kagent", f, api.returns)
  end
  out[#out + 1] = "return kagent\n"
  files["kagent.lua"] = table.concat(out, "\n")
  if api.classes ~= "" then files["kagent/results.lua"] = HEADER .. "\n" .. api.classes .. "\n" end
  return files
end

-- ---- main -----------------------------------------------------------------------------------------

local function main(argv)
  local check = argv[1] == "--check"
  local root = kagent.root
  local docs = assert(fs.read(fs.join(root, "docs/lua-api.md")))
  local files = render(parse(docs))
  local types = fs.join(root, "types")
  local bad = {}
  local names = {}
  for rel in pairs(files) do names[#names + 1] = rel end
  table.sort(names)
  for _, rel in ipairs(names) do
    local path = fs.join(types, rel)
    if check then
      if fs.read(path) ~= files[rel] then bad[#bad + 1] = rel end
    else
      fs.mkdir_p(fs.dirname(path))
      assert(fs.write(path, files[rel]))
    end
  end
  if check then
    for _, n in ipairs(fs.list(fs.join(types, "kagent")) or {}) do
      if not files["kagent/" .. n] then bad[#bad + 1] = "kagent/" .. n .. " (no such module in the docs)" end
    end
    if #bad > 0 then
      io.stderr:write("types/ does not match docs/lua-api.md: ", table.concat(bad, ", "), "\n",
        "run `build/kagent-rt scripts/gen_lua_types.lua` and commit types/\n")
      return 1
    end
    print(string.format("types/ matches docs/lua-api.md (%d files)", #names))
  else
    print(string.format("wrote %d files under %s", #names, types))
  end
  return 0
end

-- The parser is also used by tests/lua/lua_types_spec.lua.
if kagent.script:match("gen_lua_types%.lua$") then return main(kagent.args) end
return { parse = parse, render = render, MODULES = MODULES, OBJECTS = OBJECTS }
