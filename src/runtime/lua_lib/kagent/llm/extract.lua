-- Pulling code and JSON out of model replies, which wrap them in fences and prose.
local json = require("kagent.json")

local M = {}

local ALIASES = { py = "python", python3 = "python", ["c++"] = "cpp", cu = "cuda", js = "javascript",
                  sh = "bash", shell = "bash" }

local function norm(lang)
  lang = (lang or ""):lower()
  return ALIASES[lang] or lang
end

--- Fenced blocks of `text` in order: {lang, code}. An unclosed last fence (a reply cut at
--- max_tokens) still yields its block.
function M.blocks(text)
  local out, pos = {}, 1
  while true do
    local s, e, info = text:find("```([^\n`]*)\n", pos)
    if not s then break end
    local cs, ce = text:find("\n```", e)
    local code
    if cs then
      code = text:sub(e + 1, cs - 1)
      pos = ce + 1
    else
      code = text:sub(e + 1)
      pos = #text + 1
    end
    out[#out + 1] = { lang = norm(info:match("^%s*([^%s]*)")), code = code }
  end
  return out
end

--- extract_code(text, lang) -> the last block tagged `lang` (else the last untagged one), or,
--- without `lang`, the last block; nil when the text has no fenced block.
function M.code(text, lang)
  if type(text) ~= "string" then error("llm.extract_code: expected a string", 2) end
  local blocks = M.blocks(text)
  if #blocks == 0 then return nil end
  if lang then
    local want = norm(lang)
    for i = #blocks, 1, -1 do
      if blocks[i].lang == want then return blocks[i].code end
    end
    for i = #blocks, 1, -1 do
      if blocks[i].lang == "" then return blocks[i].code end
    end
  end
  return blocks[#blocks].code
end

-- End of the balanced value that opens at `s` ('{' or '['), skipping strings; nil if unbalanced.
local function balanced_end(text, s)
  local depth, i, n = 0, s, #text
  local in_str = false
  while i <= n do
    local c = text:sub(i, i)
    if in_str then
      if c == "\\" then i = i + 1 elseif c == '"' then in_str = false end
    elseif c == '"' then
      in_str = true
    elseif c == "{" or c == "[" then
      depth = depth + 1
    elseif c == "}" or c == "]" then
      depth = depth - 1
      if depth == 0 then return i end
    end
    i = i + 1
  end
end

local function try(s)
  local v = json.decode(s)
  if v ~= nil and type(v) == "table" then return v end
end

--- extract_json(text) -> value, or nil, "EPARSE: ...", "EPARSE". Tries the whole text, then the
--- fenced blocks (json-tagged first, last first), then each balanced {...}/[...] in the prose.
function M.json(text)
  if type(text) ~= "string" then error("llm.extract_json: expected a string", 2) end
  local whole = text:match("^%s*(.-)%s*$")
  local v = json.decode(whole)
  if v ~= nil then return v end
  local blocks = M.blocks(text)
  for pass = 1, 2 do
    for i = #blocks, 1, -1 do
      if (pass == 1) == (blocks[i].lang == "json") then
        v = try(blocks[i].code)
        if v then return v end
      end
    end
  end
  local pos = 1
  while true do
    local s = text:find("[{%[]", pos)
    if not s then break end
    local e = balanced_end(text, s)
    if e then
      v = try(text:sub(s, e))
      if v then return v end
    end
    pos = s + 1
  end
  return nil, "EPARSE: no JSON value found in the text", "EPARSE"
end

return M
