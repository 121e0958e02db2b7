-- Every Lua file of agents/ stays small enough to read in one sitting: at most 400 lines
-- (docs/architecture.md, "The agents' floors"). A file that outgrows it is split by what it does.
package.path = kagent.root .. "/tests/fixtures/lua_tree/?.lua;" .. package.path
local fs = kagent.fs
local tree = require("lua_tree")

local MAX_LINES = 400

describe("the files of agents/", function()
  it("are at most " .. MAX_LINES .. " lines each", function()
    local paths, long = tree.files(kagent.root .. "/agents"), {}
    for _, rel in ipairs(paths) do
      local _, lines = assert(fs.read(kagent.root .. "/agents/" .. rel)):gsub("\n", "")
      if lines > MAX_LINES then long[#long + 1] = string.format("agents/%s: %d lines", rel, lines) end
    end
    expect.truthy(#paths > 80, "found the agents' files (" .. #paths .. ")")
    expect.eq(#long, 0, "over " .. MAX_LINES .. " lines:\n  " .. table.concat(long, "\n  "))
  end)
end)
