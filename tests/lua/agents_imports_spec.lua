-- The floors of agents/ (docs/architecture.md, "The agents' floors"): a module requires modules of
-- its own floor or of floors below it, never above, so each floor can be read, replaced or
-- tested with only what lies under it. Lazy requires (inside functions) count too.
package.path = kagent.root .. "/tests/fixtures/lua_tree/?.lua;" .. package.path
local fs = kagent.fs
local tree = require("lua_tree")

local AGENTS = kagent.root .. "/agents"

-- The floors, top first. floor_of(module) -> its index; the forwarding modules at old names
-- (agents/lib/renamed.lua) stand outside the plan.
local FLOORS = {
  "entry scripts (agents/*.lua)",
  "search, flows and tools (agents/search/, agents/flows/, agents/tools/)",
  "policies (agents/policies/)",
  "search's callable parts (agents/search/promotion.lua, expand.lua)",
  "roles (agents/roles/)",
  "the run (agents/run/)",
  "helpers (agents/lib/)",
}
local CALLABLE = { ["agents.search.promotion"] = true, ["agents.search.expand"] = true }
local BY_FOLDER = { search = 2, flows = 2, tools = 2, policies = 3, roles = 5, run = 6, lib = 7 }

local function floor_of(m)
  if CALLABLE[m] then return 4 end
  local folder = m:match("^agents%.([%w_]+)%.")
  if folder then return BY_FOLDER[folder] end
  if m == "agents.run" then return 6 end  -- agents/run/init.lua
  return 1
end

-- modules() -> {name = {source, forward = true for a forwarding module}}
local function modules()
  local out = {}
  for _, rel in ipairs(tree.files(AGENTS)) do
    local source = assert(fs.read(AGENTS .. "/" .. rel))
    out[tree.module_of(rel, "agents")] = { source = source, forward = source:find('require%("agents%.lib%.renamed"%)%(') ~= nil }
  end
  return out
end

local function requires(source)
  local out = {}
  for dep in source:gmatch("require%(?%s*[\"'](agents[%w_%.]*)[\"']") do out[#out + 1] = dep end
  return out
end

describe("the requires of agents/", function()
  local mods = modules()

  it("only go down the floors", function()
    local upward, checked = {}, 0
    for m, info in pairs(mods) do
      if not info.forward then
        for _, dep in ipairs(requires(info.source)) do
          checked = checked + 1
          local from, to = floor_of(m), floor_of(dep)
          if to < from then
            upward[#upward + 1] = string.format("%s (%s) requires %s (%s)", m, FLOORS[from], dep, FLOORS[to])
          end
        end
      end
    end
    table.sort(upward)
    expect.truthy(checked > 150, "found the agents' requires (" .. checked .. ")")
    expect.eq(#upward, 0, "upward requires:\n  " .. table.concat(upward, "\n  "))
  end)

  it("name modules that exist, by their new names", function()
    local bad = {}
    for m, info in pairs(mods) do
      if not info.forward then
        for _, dep in ipairs(requires(info.source)) do
          if not mods[dep] then
            bad[#bad + 1] = m .. " requires " .. dep .. ", which is not in agents/"
          elseif mods[dep].forward then
            bad[#bad + 1] = m .. " requires the old name " .. dep
          end
        end
      end
    end
    table.sort(bad)
    expect.eq(#bad, 0, table.concat(bad, "\n"))
  end)

  it("sees an upward require as one", function()
    expect.truthy(floor_of("agents.search.driver") < floor_of("agents.policies.tune"), "the driver sits above policies")
    expect.truthy(floor_of("agents.search.promotion") > floor_of("agents.policies.tune"), "promotion sits below them")
    expect.truthy(floor_of("agents.run") < floor_of("agents.lib.metrics"), "the run sits above the helpers")
    expect.same(requires('local x = require("agents.search.state")\nlocal function f() return require "agents.run" end'),
      { "agents.search.state", "agents.run" })
  end)
end)
