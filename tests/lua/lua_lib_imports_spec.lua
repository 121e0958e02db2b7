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
      for _, dep in ipairs(tree.requires(assert(fs.read(LIB .. "/" .. rel)))) do
        if dep ~= "kagent" then edges[m][#edges[m] + 1] = dep end  -- `kagent` is the lazy index
      end
    end
    expect.truthy(#names > 20, "found the library's modules")
    local circles = tree.circles(edges)
    expect.eq(#circles, 0, "circles of requires:\n  " .. table.concat(circles, "\n  "))
  end)
end)
