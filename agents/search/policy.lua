-- Loads a search policy: a Lua file returning a table of hooks that agents/search/driver.lua calls
-- (docs/policies.md). The hooks are detected, the way wrk detects a script's functions:
--   required  parents(beam, run), directions(parent, run), keep(beam, children, run)
--   optional  expand(parent, direction, run, w)   default: the LLM worker (agents/search/expand.lua)
--             stop(state, run, default)            default: the driver's default_stop, also passed as `default`
-- and `llm = false` marks a policy that runs without an LLM; `profile_children = true` one that
-- reads every candidate's hardware counters (otherwise only kept kernels are profiled).
local M = {}

M.REQUIRED = { "parents", "directions", "keep" }
M.OPTIONAL = { "expand", "stop" }
M.SHIPPED = { "beam", "greedy", "skill", "tune" }

-- path_of(name) -> the file of policy `name`: agents/policies/<name>.lua on kagent.path (a user's
-- own folder first, then the shipped ones), or the path given
function M.path_of(name)
  if name:find("/") or name:match("%.lua$") then return name end
  local rel = "agents/policies/" .. name .. ".lua"
  return kagent.resolve(rel) or (kagent.root .. "/" .. rel)
end

-- check(p, label) -> p, or nil and a message naming what is missing or of the wrong type
function M.check(p, label)
  if type(p) ~= "table" then return nil, label .. " must return a table of hooks, got " .. type(p) end
  local missing = {}
  for _, h in ipairs(M.REQUIRED) do
    if type(p[h]) ~= "function" then missing[#missing + 1] = h end
  end
  if #missing > 0 then
    return nil, label .. " lacks the required hook(s) " .. table.concat(missing, ", ")
      .. " (a policy defines parents(beam, run), directions(parent, run), keep(beam, children, run))"
  end
  for _, h in ipairs(M.OPTIONAL) do
    if p[h] ~= nil and type(p[h]) ~= "function" then return nil, label .. ": " .. h .. " must be a function" end
  end
  p.name = p.name or label:match("([^/]+)%.lua$") or label
  return p
end

-- load(name_or_path) -> policy table, or nil and a message
function M.load(name)
  local path = M.path_of(name)
  local chunk, err = loadfile(path)
  if not chunk then
    if not require("kagent.fs").exists(path) then
      local tip = require("agents.run.args").suggest(name, M.SHIPPED)
      return nil, "no policy '" .. name .. "' (" .. path .. ")" .. (tip and ("; did you mean '" .. tip .. "'?") or "")
        .. "; shipped: " .. table.concat(M.SHIPPED, ", ") .. ", or give a path.lua"
    end
    return nil, "policy " .. path .. ": " .. tostring(err)
  end
  local ok, p = pcall(chunk)
  if not ok then return nil, "policy " .. path .. " failed to load: " .. tostring(p) end
  local checked, cerr = M.check(p, path)
  if not checked then return nil, cerr end
  checked.path = path
  return checked
end

return M
