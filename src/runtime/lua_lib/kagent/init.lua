-- The global `kagent`: facts about the run, the search path, plus each module, loaded on first use.
local native = require("kagent.native")
local search_path = require("kagent.search_path")

local modules = {
  task = true, time = true, proc = true, http = true, llm = true, mem = true, gpu = true,
  prompt = true, json = true, yaml = true, log = true, fs = true, secrets = true,
}

local dirs = search_path.dirs(native.info.root)
package.path = search_path.package_path(dirs, package.path)

local kagent = {
  version = native.info.version,
  args = native.info.args,
  script = search_path.script(dirs, native.info.script) or native.info.script,
  root = native.info.root,
  exe = native.info.exe,
  path = dirs,
}

--- resolve(rel) -> the first "<dir>/<rel>" on kagent.path that exists, or nil.
function kagent.resolve(rel)
  if type(rel) ~= "string" then error("kagent.resolve: rel must be a string", 2) end
  return search_path.resolve(kagent.path, rel)
end

--- sha256(s) -> lower-case hex SHA-256 digest of the string s (OpenSSL's): the one hash of the
--- project's fingerprints (agents/lib/fingerprint.lua).
function kagent.sha256(s)
  if type(s) ~= "string" then error("kagent.sha256: s must be a string", 2) end
  return native.http.sha256(s)
end

--- files(subdir, suffix) -> sorted paths of "<dir>/<subdir>/*<suffix>" on kagent.path, one per name.
function kagent.files(subdir, suffix)
  if type(subdir) ~= "string" then error("kagent.files: subdir must be a string", 2) end
  return search_path.files(kagent.path, subdir, suffix)
end

return setmetatable(kagent, {
  __index = function(t, k)
    if modules[k] then
      local m = require("kagent." .. k)
      rawset(t, k, m)
      return m
    end
    return nil
  end,
})
