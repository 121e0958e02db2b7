-- The floors of agents/ (docs/architecture.md, "The agents' floors"): a module requires modules of
-- its own floor or of floors below it, never above, and no circle of requires, so each floor can
-- be read, replaced or tested with only what lies under it. Lazy requires (inside functions)
-- count too. The same check runs on tests/fixtures/lua_tree/planted_agents/, a tree with planted
-- violations, so a check that stopped seeing them fails.
package.path = kagent.root .. "/tests/fixtures/lua_tree/?.lua;" .. package.path
local fs = kagent.fs
local tree = require("lua_tree")

local AGENTS = kagent.root .. "/agents"
local PLANTED = kagent.root .. "/tests/fixtures/lua_tree/planted_agents"

-- The floors, top first: each floor's modules are those under its prefixes (the longest prefix
-- that matches decides); a module under none is an entry script. The tools run searches and flows
-- (a sweep's task runs search.main, its plan reads the fuse options); the flows run searches; a
-- search writes its report pages, which are drawn from a run's saved folder alone.
local FLOORS = {
  { "entry scripts (agents/*.lua)" },
  { "tools (agents/tools/bench/, compare/, sweep/)", "agents.tools" },
  { "flows (agents/flows/)", "agents.flows" },
  { "search (agents/search/)", "agents.search" },
  { "report pages (agents/tools/report/)", "agents.tools.report" },
  { "policies (agents/policies/)", "agents.policies" },
  { "search's callable parts (agents/search/promotion.lua, expand.lua)", "agents.search.promotion", "agents.search.expand" },
  { "roles (agents/roles/)", "agents.roles" },
  { "the run (agents/run/)", "agents.run" },
  { "helpers (agents/lib/)", "agents.lib" },
}

local function floor_of(m)
  local best, best_len = 1, 0
  for i, floor in ipairs(FLOORS) do
    for j = 2, #floor do
      local p = floor[j]
      if #p > best_len and (m == p or m:sub(1, #p + 1) == p .. ".") then best, best_len = i, #p end
    end
  end
  return best
end

-- modules(root) -> {name = {source, forward = true for a forwarding module}}; the forwarding
-- modules at old names (agents/lib/renamed.lua) stand outside the plan
local function modules(root)
  local out = {}
  for _, rel in ipairs(tree.files(root)) do
    local source = assert(fs.read(root .. "/" .. rel))
    out[tree.module_of(rel, "agents")] = { source = source, forward = source:find('require%("agents%.lib%.renamed"%)%(') ~= nil }
  end
  return out
end

-- check(mods) -> upward requires (sorted lines), circles ("a -> b -> a"), requires checked
local function check(mods)
  local upward, edges, checked = {}, {}, 0
  for m, info in pairs(mods) do
    if not info.forward then
      edges[m] = tree.requires(info.source, "agents")
      for _, dep in ipairs(edges[m]) do
        checked = checked + 1
        local from, to = floor_of(m), floor_of(dep)
        if to < from then
          upward[#upward + 1] = string.format("%s (%s) requires %s (%s)", m, FLOORS[from][1], dep, FLOORS[to][1])
        end
      end
    end
  end
  table.sort(upward)
  return upward, tree.circles(edges), checked
end

describe("the requires of agents/", function()
  local mods = modules(AGENTS)

  it("only go down the floors and make no circle", function()
    local upward, circles, checked = check(mods)
    expect.truthy(checked > 150, "found the agents' requires (" .. checked .. ")")
    expect.eq(#upward + #circles, 0, "upward requires:\n  " .. table.concat(upward, "\n  ")
      .. "\ncircles of requires:\n  " .. table.concat(circles, "\n  "))
  end)

  it("name modules that exist, by their new names", function()
    local bad = {}
    for m, info in pairs(mods) do
      if not info.forward then
        for _, dep in ipairs(tree.requires(info.source, "agents")) do
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

  it("sees every planted upward require and circle, and nothing else", function()
    local upward, circles = check(modules(PLANTED))
    expect.same(upward, {
      "agents.search.driver (search (agents/search/)) requires agents.flows.fuse (flows (agents/flows/))",
      "agents.tools.report.page (report pages (agents/tools/report/)) requires agents.search.confirm (search (agents/search/))",
    })
    expect.same(circles, { "agents.lib.a -> agents.lib.b -> agents.lib.a" })
  end)

  it("places modules on their floors", function()
    expect.truthy(floor_of("agents.tools.sweep.task") < floor_of("agents.flows.fuse"), "the tools sit above the flows")
    expect.truthy(floor_of("agents.flows.fuse") < floor_of("agents.search.driver"), "the flows sit above search")
    expect.truthy(floor_of("agents.search.summary") < floor_of("agents.tools.report"), "search sits above its report pages")
    expect.truthy(floor_of("agents.search.driver") < floor_of("agents.policies.tune"), "the driver sits above policies")
    expect.truthy(floor_of("agents.search.promotion") > floor_of("agents.policies.tune"), "promotion sits below them")
    expect.truthy(floor_of("agents.run") < floor_of("agents.lib.metrics"), "the run sits above the helpers")
    expect.eq(floor_of("agents.beam"), 1)
    expect.same(tree.requires('local x = require("agents.search.state")\nlocal function f() return require "agents.run" end', "agents"),
      { "agents.search.state", "agents.run" })
  end)
end)
