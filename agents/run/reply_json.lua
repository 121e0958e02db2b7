-- JSON replies as models write them (agents/run/replies.lua reads code and holds the asking loop's
-- words): JSON in prose or in any fence, Python-style or sloppy JSON, keys spelled differently, a
-- list where an object was asked for. json(text, want) returns value, how ("used" | "repaired")
-- or nil, "EPARSE: why", "EPARSE" (docs/agents.md, "Replies as models write them").
local json = require("kagent.json")
local extract = require("kagent.llm.extract")
local clean = require("agents.run.replies").clean

local M = {}

-- Python-style and sloppy JSON made strict: single-quoted strings, trailing commas, True/False/
-- None, comments. Strings are copied as they are (a comma or quote inside one stays).
function M.strict_json(s)
  local out, i, n = {}, 1, #s
  while i <= n do
    local c = s:sub(i, i)
    if c == '"' or c == "'" then
      local j, buf = i + 1, {}
      while j <= n do
        local d = s:sub(j, j)
        if d == "\\" then
          local nx = s:sub(j + 1, j + 1)
          buf[#buf + 1] = (nx == "'" and c == "'") and "'" or (d .. nx)
          j = j + 2
        elseif d == c then break
        elseif d == '"' then buf[#buf + 1] = '\\"'; j = j + 1
        elseif d == "\n" then buf[#buf + 1] = "\\n"; j = j + 1
        else buf[#buf + 1] = d; j = j + 1 end
      end
      out[#out + 1] = '"' .. table.concat(buf) .. '"'
      i = j + 1
    elseif c == "," then
      local k = i + 1
      while k <= n do
        if s:sub(k, k):match("%s") then k = k + 1
        elseif s:sub(k, k + 1) == "//" then k = (s:find("\n", k, true) or n) + 1
        else break end
      end
      local nx = s:sub(k, k)
      if nx ~= "}" and nx ~= "]" then out[#out + 1] = c end
      i = i + 1
    elseif c == "/" and s:sub(i + 1, i + 1) == "/" then
      local e = s:find("\n", i, true) or n + 1
      i = e
    elseif c:match("[%a_]") then
      local word = s:match("^[%w_]+", i)
      local map = { True = "true", False = "false", None = "null" }
      out[#out + 1] = map[word] or word
      i = i + #word
    else
      out[#out + 1] = c
      i = i + 1
    end
  end
  return table.concat(out)
end

-- candidates(text) -> the strings that may hold the JSON value: fenced blocks (any language,
-- last first) and each balanced {...} or [...] of the text
local function candidates(text)
  local out = {}
  local blocks = extract.blocks(text)
  for i = #blocks, 1, -1 do out[#out + 1] = blocks[i].code end
  local pos = 1
  while true do
    local s = text:find("[{%[]", pos)
    if not s then break end
    local depth, q, j = 0, nil, s
    while j <= #text do
      local c = text:sub(j, j)
      if q then
        if c == "\\" then j = j + 1 elseif c == q then q = nil end
      elseif c == '"' or c == "'" then q = c
      elseif c == "{" or c == "[" then depth = depth + 1
      elseif c == "}" or c == "]" then
        depth = depth - 1
        if depth == 0 then break end
      end
      j = j + 1
    end
    if depth == 0 and j <= #text then
      out[#out + 1] = text:sub(s, j)
      pos = j + 1
    else
      pos = s + 1
    end
  end
  return out
end

local function norm_key(k) return (tostring(k):lower():gsub("[^%w]", "")) end
local function singular(k) return (norm_key(k):gsub("s$", "")) end

-- keys_of(schema) -> {names = {name = true}, norm = {normalized = name}, sing = {singular = name}}
-- of every object key in a schema's example JSON
local function keys_of(schema)
  local known = { names = {}, norm = {}, sing = {} }
  local function walk(v)
    if type(v) ~= "table" then return end
    for k, x in pairs(v) do
      if type(k) == "string" then known.names[k], known.norm[norm_key(k)] = true, k end
      walk(x)
    end
  end
  walk(type(schema) == "string" and json.decode(schema) or schema)
  for n, k in pairs(known.norm) do
    -- "plan" and "plans" both in a schema: neither is the other's singular
    local sg = singular(n)
    if known.sing[sg] == nil then known.sing[sg] = k else known.sing[sg] = false end
  end
  return known
end

-- conform(v, known) -> v with keys renamed to the schema's (camelCase, capitals, singular or
-- plural), and whether any was renamed. A key the schema has is kept as it is.
local function conform(v, known)
  if type(v) ~= "table" or not known.names then return v, false end
  local changed, out = false, {}
  for k, x in pairs(v) do
    local cx, c = conform(x, known)
    changed = changed or c
    if type(k) == "string" and not known.names[k] then
      local name = known.norm[norm_key(k)] or known.sing[singular(k)]
      if name and v[name] == nil then k, changed = name, true end
    end
    out[k] = cx
  end
  return out, changed
end

-- shaped(v, want) -> the value the role reads, or nil. want: {key = "bottlenecks"} (an object with
-- this key, or an array of its items given bare) or {fields = {"route"}} (an object with one of
-- these fields)
local function shaped(v, want)
  if type(v) ~= "table" then return nil end
  if want.key then
    if type(v[want.key]) == "table" then return v end
    if v[1] ~= nil and type(v[1]) == "table" then return { [want.key] = v } end
    return nil
  end
  for _, f in ipairs(want.fields or {}) do
    if v[f] ~= nil then return v end
  end
  if not want.fields then return v end
end

-- unwrap(v, want) -> the shaped value one level down: the only object of a wrapper ({"result":
-- {...}}), or the only array of objects under another name ({"issues": [...]})
local function unwrap(v, want)
  if type(v) ~= "table" then return nil end
  local tables, arrays = {}, {}
  for _, x in pairs(v) do
    if type(x) == "table" then
      tables[#tables + 1] = x
      if type(x[1]) == "table" then arrays[#arrays + 1] = x end
    end
  end
  if #tables == 1 then
    local s = shaped(tables[1], want)
    if s then return s end
  end
  if want.key and #arrays == 1 then return { [want.key] = arrays[1] } end
end

-- json(text, want) -> value, how | nil, "EPARSE: ...", "EPARSE". want: {key|fields, schema (the
-- example JSON of the prompt, whose key names renamed keys are mapped back to)}
function M.json(text, want)
  want = want or {}
  local t = clean(text)
  if not t:match("%S") then return nil, "EPARSE: the reply is empty", "EPARSE" end
  local known = want.schema and keys_of(want.schema) or {}
  local function fit(v)
    local s = shaped(v, want)
    if s then return s, false end
    local c, renamed = conform(v, known)
    s = renamed and shaped(c, want)
    if s then return s, true end
    s = unwrap(c, want)
    if s then return s, true end
  end
  local v = extract.json(t)
  if v ~= nil then
    local s, fixed = fit(v)
    if s then return s, fixed and "repaired" or "used" end
  end
  for _, cand in ipairs(candidates(t)) do
    local d = json.decode(cand)
    local fixed = false
    if type(d) ~= "table" then d, fixed = json.decode(M.strict_json(cand)), true end
    if type(d) == "table" then
      local s, f2 = fit(d)
      if s then return s, (fixed or f2) and "repaired" or "used" end
    end
  end
  if v ~= nil then
    return nil, "EPARSE: the reply's JSON does not have the fields asked for (" .. (want.key or table.concat(want.fields or {}, ", ")) .. ")", "EPARSE"
  end
  return nil, "EPARSE: the reply holds no JSON value", "EPARSE"
end

return M
