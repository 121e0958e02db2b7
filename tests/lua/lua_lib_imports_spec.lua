-- The Lua library's modules form no circle of requires, lazy ones (inside functions) included:
-- a circle makes the load order decide which half sees the other half-built.
package.path = kagent.root .. "/tests/fixtures/lua_tree/?.lua;" .. package.path
local fs = kagent.fs
local tree = require("lua_tree")

local LIB = kagent.root .. "/src/runtime/lua_lib"

describe("the Lua library's requires", function()
  it("make no circle", function()
    local edges, names = {}, {}
    for _, rel in ipairs(tree.files(LIB)) do
      local m = tree.module_of(rel)
      names[#names + 1] = m
      edges[m] = {}
      for dep in assert(fs.read(LIB .. "/" .. rel)):gmatch("require%(?%s*[\"']([%w_%.]+)[\"']") do
        if dep ~= m and dep ~= "kagent" then edges[m][#edges[m] + 1] = dep end  -- `kagent` is the lazy index
      end
    end
    expect.truthy(#names > 20, "found the library's modules")
    local state, stack = {}, {}
    local function visit(m)
      if state[m] == "done" or not edges[m] then return end
      if state[m] == "open" then
        local at
        for i, s in ipairs(stack) do if s == m then at = i end end
        error("a circle of requires: " .. table.concat(stack, " -> ", at) .. " -> " .. m, 0)
      end
      state[m] = "open"
      stack[#stack + 1] = m
      for _, d in ipairs(edges[m]) do visit(d) end
      stack[#stack] = nil
      state[m] = "done"
    end
    for _, m in ipairs(names) do visit(m) end
  end)
end)
