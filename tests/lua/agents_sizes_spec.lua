-- Every Lua file of agents/ stays small enough to read in one sitting: at most 400 lines
-- (docs/architecture.md, "The agents' floors"). A file that outgrows it is split by what it does.
local fs = kagent.fs

local MAX_LINES = 400

local function files(dir, out)
  for _, name in ipairs(fs.list(dir) or {}) do
    local path = dir .. "/" .. name
    if fs.is_dir(path) then files(path, out) elseif name:match("%.lua$") then out[#out + 1] = path end
  end
  return out
end

describe("the files of agents/", function()
  it("are at most " .. MAX_LINES .. " lines each", function()
    local paths, long = files(kagent.root .. "/agents", {}), {}
    for _, path in ipairs(paths) do
      local _, lines = assert(fs.read(path)):gsub("\n", "")
      if lines > MAX_LINES then long[#long + 1] = string.format("%s: %d lines", path:sub(#kagent.root + 2), lines) end
    end
    expect.truthy(#paths > 80, "found the agents' files (" .. #paths .. ")")
    expect.eq(#long, 0, "over " .. MAX_LINES .. " lines:\n  " .. table.concat(long, "\n  "))
  end)
end)
