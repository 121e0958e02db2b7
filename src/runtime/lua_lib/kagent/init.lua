-- The global `kagent`: facts about the run plus each module, loaded on first use.
local native = require("kagent.native")

local modules = {
  task = true, time = true, proc = true, http = true, llm = true, mem = true, gpu = true,
  prompt = true, json = true, log = true, fs = true, secrets = true,
}

local kagent = {
  version = native.info.version,
  args = native.info.args,
  script = native.info.script,
  root = native.info.root,
}

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
