-- The LLM-free decomposition of agents/fuse.lua: the traced graph (the evaluator's analysis,
-- pool:analyze kind "problem") cut at fusion boundaries by a fixed rule, as a plan in the very
-- form an LLM's reply takes, so decomposition.validate checks it exactly as it checks the LLM's.
--
-- The rule (docs/agents.md, "The FX splitter"): walking the ops in execution order, each anchor
-- (a GEMM, a convolution, a transposed convolution, attention, a recurrent layer) starts a
-- subgraph, and the ops after it (pointwise, normalization, reduction, pooling, views) are its
-- epilogue, up to the next anchor; ops before the first anchor form a prologue of their own. Two
-- adjustments keep every subgraph a problem of its own: views at the end of an epilogue move to
-- the next subgraph (a transposed or sliced value would cross the border with strides its kernel
-- was not made for) unless they take a tuple apart, and subgraphs are merged where a tuple or a
-- view of a subgraph's own input (a parameter included) would still cross a border (tuples stay
-- with the ops that take them apart; a subgraph may not return its input's memory). As subgraphs
-- are runs of consecutive ops, each reads only from earlier ones: no cycle can arise.
local decomposition = require("agents.lib.decomposition")

local M = {}

M.ANCHORS = { gemm = true, conv = true, conv_transpose = true, attention = true, recurrent = true }
M.RULE = "each GEMM, convolution, attention or recurrent layer with the pointwise, normalization, reduction and "
  .. "view ops after it up to the next such op (ops before the first form a prologue); trailing views "
  .. "move to the next subgraph; subgraphs a tuple or a view of their input would leave are merged"

local function reads_tuple(g, op)
  for _, v in ipairs(op.inputs or {}) do
    if g.values[v] and not g.values[v].tensor then return true end
  end
  return false
end

-- groups(g) -> array of arrays of op positions (1-based, execution order)
local function groups(g)
  local out, cur = {}, nil
  for i, op in ipairs(g.ops) do
    if M.ANCHORS[op.category] or not cur then
      if cur and M.ANCHORS[op.category] then
        -- trailing views of the previous group start this one, up to one that takes a tuple
        -- apart (it stays with the tuple's maker)
        local moved = {}
        while #cur > 1 and g.ops[cur[#cur]].category == "view" and not reads_tuple(g, g.ops[cur[#cur]]) do
          table.insert(moved, 1, table.remove(cur))
        end
        out[#out + 1] = cur
        cur = moved
      elseif cur then
        out[#out + 1] = cur
        cur = {}
      else
        cur = {}
      end
    end
    cur[#cur + 1] = i
  end
  if cur and #cur > 0 then out[#out + 1] = cur end
  local kept = {}
  for _, grp in ipairs(out) do if #grp > 0 then kept[#kept + 1] = grp end end
  -- a group of views alone (`x[0]` before the first GEMM) computes nothing: as a problem of its
  -- own its output would be its input's memory; it joins the next group (the last, the previous)
  local joined = {}
  for k, grp in ipairs(kept) do
    local only_views = true
    for _, i in ipairs(grp) do if g.ops[i].category ~= "view" then only_views = false end end
    if only_views and k < #kept then
      for j = #grp, 1, -1 do table.insert(kept[k + 1], 1, grp[j]) end
    elseif only_views and #joined > 0 then
      for _, i in ipairs(grp) do table.insert(joined[#joined], i) end
    else
      joined[#joined + 1] = grp
    end
  end
  return joined
end

-- views that make a new tensor; every other op of category "view" may return its input's memory
local COPIES = { cat = true, stack = true, repeat_ = true, clone = true }

-- aliases_input(g, owner, k, v) -> true when value v, made in group k, may be its input's memory:
-- a chain of views inside group k back to a value from outside it, or to a parameter (the
-- subgraph problem takes its parameters as inputs: `rearrange(self.B, ...)` in KernelBench Level 3
-- #48); as the subgraph's output it would share memory with the subgraph's input, which a
-- verified kernel must not
local function aliases_input(g, owner, k, v)
  local val = g.values[v]
  while val and val.producer and owner[val.producer] == k do
    local op = g.op[val.producer]
    if op.category ~= "view" or COPIES[op.op == "repeat" and "repeat_" or op.op] then return false end
    if not (op.inputs or {})[1] then return #(op.params or {}) > 0 end
    val = g.values[op.inputs[1]]
  end
  return val ~= nil
end

-- merge_crossings(g, gs) -> gs with the groups between a value's producer and a reader of it
-- joined where the value must not cross a border: a tuple, or a view of the producing group's
-- input
local function merge_crossings(g, gs)
  local changed = true
  while changed do
    changed = false
    local owner = {}
    for k, grp in ipairs(gs) do for _, i in ipairs(grp) do owner[g.ops[i].name] = k end end
    for k, grp in ipairs(gs) do
      for _, i in ipairs(grp) do
        for _, v in ipairs(g.ops[i].inputs or {}) do
          local val = g.values[v]
          local from = val and val.producer and owner[val.producer]
          if from and from < k and (not val.tensor or aliases_input(g, owner, from, v)) then
            local joined = {}
            for j = from, k do for _, x in ipairs(gs[j]) do joined[#joined + 1] = x end end
            local rest = {}
            for j = 1, from - 1 do rest[#rest + 1] = gs[j] end
            rest[#rest + 1] = joined
            for j = k + 1, #gs do rest[#rest + 1] = gs[j] end
            gs, changed = rest, true
            break
          end
        end
        if changed then break end
      end
      if changed then break end
    end
  end
  return gs
end

local function border_list(g, names)
  local out = {}
  for k, v in ipairs(names) do out[k] = { value = v, shape = g.values[v].shape, dtype = g.values[v].dtype } end
  return out
end

-- name(g, grp) -> a readable name from the ops' labels ("conv2d_relu_add")
local function name(g, grp)
  local parts, seen = {}, {}
  for _, i in ipairs(grp) do
    local label = tostring(g.ops[i].op or "op"):lower()
    if not seen[label] and #parts < 4 then seen[label] = true; parts[#parts + 1] = label end
  end
  return table.concat(parts, "_")
end

-- plan(analysis) -> the plan {subgraphs = {{name, ops, inputs, outputs, params, fusion}}, rule},
-- or nil and why when the graph has no ops
function M.plan(a)
  local g = decomposition.index(a)
  if #g.ops == 0 then return nil, "the traced graph has no ops" end
  local gs = merge_crossings(g, groups(g))
  local sgs = {}
  for k, grp in ipairs(gs) do
    local names = {}
    for j, i in ipairs(grp) do names[j] = g.ops[i].name end
    local _, ins, outs, params = decomposition.borders(g, names)
    local anchor = M.ANCHORS[g.ops[grp[1]].category] and g.ops[grp[1]].category
      or (function() for _, i in ipairs(grp) do if M.ANCHORS[g.ops[i].category] then return g.ops[i].category end end end)()
    sgs[k] = { name = name(g, grp), ops = names, inputs = border_list(g, ins), outputs = border_list(g, outs),
      params = params, fusion = anchor and (anchor .. " with its epilogue") or "pointwise prologue" }
  end
  return { subgraphs = sgs, rule = M.RULE }
end

-- decompose(analysis) -> decomposition (decomposition.validate's), or nil and the reasons
-- (array of sentences): the plan checked against the trace as an LLM's would be
function M.decompose(a)
  if not a or not a.decomposable then
    local u = a and a.unsupported and a.unsupported[1]
    return nil, { "the traced graph cannot be split: " .. tostring(u and u.reason or (a and a.trace_error) or "no analysis") }
  end
  local p, why = M.plan(a)
  if not p then return nil, { why } end
  return decomposition.validate(a, p)
end

return M
