-- kagent.prompt: {{var}} templates for LLM prompts.
-- Plain Lua on purpose: prompts are policy, and a researcher should be able to read exactly how a
-- template becomes text. A missing variable raises, because a prompt silently missing its
-- metrics or kernel code wastes an LLM call and poisons the run's traces.
local M = {}

local function read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end

-- A bare name ("diagnose") means prompts/<name>.md: in M.dirs (searched first), then on
-- kagent.path (the user's folder, then kagent.root); anything with a slash or a .md suffix is a path.
M.dirs = {}

function M.resolve(name_or_path)
  if type(name_or_path) ~= "string" then
    error("prompt.resolve: name must be a string", 2)
  end
  if name_or_path:find("/", 1, true) or name_or_path:match("%.md$") or name_or_path:match("%.txt$") then
    return name_or_path
  end
  for _, d in ipairs(M.dirs) do
    local p = d .. "/" .. name_or_path .. ".md"
    if read_file(p) then return p end
  end
  local rel = "prompts/" .. name_or_path .. ".md"
  local kagent = require("kagent")
  return kagent.resolve(rel) or (kagent.root .. "/" .. rel)
end

local function lookup(vars, key)
  local v = vars
  for part in key:gmatch("[^%.]+") do
    if type(v) ~= "table" then return nil end
    v = v[part]
  end
  return v
end

local function to_text(v, key)
  local t = type(v)
  if t == "string" then return v end
  if t == "number" then
    if v == math.floor(v) and math.abs(v) < 1e15 then return string.format("%d", v) end
    return string.format("%.6g", v)
  end
  if t == "boolean" then return tostring(v) end
  if t == "table" then
    local ok, json = pcall(require, "kagent.json")
    if ok and json and json.encode then return json.encode(v, { pretty = true }) end
    error("prompt.render: variable '" .. key .. "' is a table and kagent.json is unavailable", 3)
  end
  error("prompt.render: variable '" .. key .. "' has unsupported type " .. t, 3)
end

-- render_string(template, vars, label) -> text. `{{name}}` must exist in vars; `{{name?}}` may be
-- absent (renders empty). Dotted names reach into tables: `{{gpu.name}}`.
function M.render_string(template, vars, label)
  if type(template) ~= "string" then error("prompt.render_string: template must be a string", 2) end
  vars = vars or {}
  if type(vars) ~= "table" then error("prompt.render_string: vars must be a table", 2) end
  local missing
  local out = template:gsub("{{%s*([%w_%.]+)(%??)%s*}}", function(key, optional)
    local v = lookup(vars, key)
    if v == nil then
      if optional == "?" then return "" end
      missing = missing or key
      return ""
    end
    return to_text(v, key)
  end)
  if missing then
    error(string.format("prompt.render: missing variable '%s' in %s", missing, label or "template"), 3)
  end
  return out
end

-- render(name_or_path, vars) -> text, or nil, "ENOTFOUND: ...", "ENOTFOUND" when no template file.
function M.render(name_or_path, vars)
  local path = M.resolve(name_or_path)
  local tpl = read_file(path)
  if not tpl then
    return nil, "ENOTFOUND: prompt template " .. path, "ENOTFOUND"
  end
  return M.render_string(tpl, vars, path)
end

-- variables(name_or_path) -> sorted list of the required variable names (for docs and checks).
function M.variables(name_or_path)
  local tpl = read_file(M.resolve(name_or_path))
  if not tpl then return nil, "ENOTFOUND: prompt template " .. name_or_path, "ENOTFOUND" end
  local seen, out = {}, {}
  for key, opt in tpl:gmatch("{{%s*([%w_%.]+)(%??)%s*}}") do
    if opt == "" and not seen[key] then seen[key] = true; out[#out + 1] = key end
  end
  table.sort(out)
  return out
end

return M
