-- The search path for agents, roles, policies, skills and prompts (kagent.path): the user's folder
-- first, then kagent.root (the checkout or the installed share/kagent-rt). A user's file shadows
-- the shipped one of the same relative path, so nobody edits the installed copies.
local native = require("kagent.native")

local M = {}

local function set(v) return v ~= nil and v ~= "" end

--- user_dir() -> $KAGENT_HOME, else ${XDG_DATA_HOME:-$HOME/.local/share}/kagent-rt (nil without HOME).
function M.user_dir()
  local dir
  if set(os.getenv("KAGENT_HOME")) then
    dir = os.getenv("KAGENT_HOME")
  elseif set(os.getenv("XDG_DATA_HOME")) then
    dir = os.getenv("XDG_DATA_HOME") .. "/kagent-rt"
  elseif set(os.getenv("HOME")) then
    dir = os.getenv("HOME") .. "/.local/share/kagent-rt"
  end
  return dir and native.fs.abspath(dir) or nil
end

--- dirs(root) -> array of folders, searched in order (the user's folder only when it differs).
function M.dirs(root)
  local out = {}
  local user = M.user_dir()
  if user and user ~= root then out[#out + 1] = user end
  out[#out + 1] = root
  return out
end

--- resolve(dirs, rel) -> the first "<dir>/<rel>" that exists, or nil.
function M.resolve(dirs, rel)
  for _, d in ipairs(dirs) do
    local p = d .. "/" .. rel
    if native.fs.exists(p) then return p end
  end
  return nil
end

--- files(dirs, subdir, suffix) -> sorted array of paths of "<dir>/<subdir>/*<suffix>", one per file
--- name: an earlier folder's file shadows a later one's.
function M.files(dirs, subdir, suffix)
  local by_name, names = {}, {}
  for _, d in ipairs(dirs) do
    local folder = d .. "/" .. subdir
    for _, n in ipairs(native.fs.is_dir(folder) and native.fs.list(folder) or {}) do
      if (suffix == nil or n:sub(-#suffix) == suffix) and not by_name[n] then
        by_name[n] = folder .. "/" .. n
        names[#names + 1] = n
      end
    end
  end
  table.sort(names)
  local out = {}
  for i, n in ipairs(names) do out[i] = by_name[n] end
  return out
end

--- package_path(dirs, old) -> package.path with "<dir>/?.lua;<dir>/?/init.lua" of each folder
--- first, so require("agents.roles.optimizer") finds a user's role before the shipped one.
function M.package_path(dirs, old)
  local parts = {}
  for _, d in ipairs(dirs) do
    parts[#parts + 1] = d .. "/?.lua"
    parts[#parts + 1] = d .. "/?/init.lua"
  end
  parts[#parts + 1] = old
  return table.concat(parts, ";")
end

--- script(dirs, arg) -> the script to run: `arg` itself when it is a file (or absolute), else the
--- first match on the search path; nil, message naming where it looked when there is none.
function M.script(dirs, arg)
  if arg:sub(1, 1) == "/" or native.fs.exists(arg) then return arg end
  local found = M.resolve(dirs, arg)
  if found and not native.fs.is_dir(found) then return found end
  return nil, string.format("cannot open %s: no such file here nor in %s", arg, table.concat(dirs, ", "))
end

--- eval_dir(root) -> the evaluator package's folder: eval/ in an installed share/kagent-rt, else
--- src/gpu/eval of a checkout. kagent.gpu starts its workers from there and kagent.secrets reads
--- the variables they may inherit (kagent_eval/env_allow.txt) there.
function M.eval_dir(root)
  if native.fs.is_dir(root .. "/eval/kagent_eval") then return root .. "/eval" end
  return root .. "/src/gpu/eval"
end

return M
