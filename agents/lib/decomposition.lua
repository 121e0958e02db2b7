-- A decomposition of a traced model into subgraphs (agents/fuse.lua): the graph the evaluator's
-- analysis traced (pool:analyze, kind "problem"), its text for prompts, and the check of a
-- proposed decomposition against it. A proposal is refused, with every reason found, unless each
-- op is in exactly one subgraph, each subgraph declares exactly the values that cross its border
-- with their traced shapes (and, when it lists them, exactly the parameters its ops read), only
-- tensors cross borders, and the subgraphs can run in some order (no cycle).
local json = require("kagent.json")

local M = {}

-- index(analysis) -> graph {ops = array, op = {name = op}, pos = {name = i}, values = {name =
-- {shape, dtype, tensor, producer, input, meta (the analysis entry: spread too)}}, consumers =
-- {value = {op names}}, is_output = {value = true}, inputs, outputs, params}
function M.index(a)
  local g = { ops = a.ops or {}, op = {}, pos = {}, values = {}, consumers = {}, is_output = {},
    inputs = a.inputs or {}, outputs = a.outputs or {}, params = a.params or {} }
  for _, v in ipairs(g.inputs) do
    g.values[v.name] = { shape = v.shape, dtype = v.dtype, tensor = true, input = true, meta = v }
  end
  for i, op in ipairs(g.ops) do
    g.op[op.name], g.pos[op.name] = op, i
    g.values[op.name] = { shape = op.shape, dtype = op.dtype, tensor = op.tensor ~= false, producer = op.name, meta = op }
    for _, v in ipairs(op.inputs or {}) do
      g.consumers[v] = g.consumers[v] or {}
      table.insert(g.consumers[v], op.name)
    end
  end
  for _, v in ipairs(g.outputs) do g.is_output[v] = true end
  return g
end

local function shape_text(s)
  if type(s) ~= "table" then return tostring(s) end
  local parts = {}
  for i, d in ipairs(s) do parts[i] = tostring(d) end
  return "[" .. table.concat(parts, ", ") .. "]"
end
M.shape_text = shape_text

local function same_shape(a, b)
  if type(a) ~= "table" or type(b) ~= "table" or #a ~= #b then return false end
  for i = 1, #a do if tonumber(a[i]) ~= tonumber(b[i]) then return false end end
  return true
end

-- readable(expr, op) -> the functional form with values and parameters by their names
function M.readable(expr, op)
  local s = expr:gsub("%${[vp]:([^}]+)}", "%1")
  return (s:gsub("%${m}", function() return op and op.module_ctor or "layer" end))
end

-- text(analysis) -> the traced graph for prompts: inputs, ops in execution order, outputs
function M.text(a)
  local g = M.index(a)
  local out = { "Graph inputs:" }
  for _, v in ipairs(g.inputs) do out[#out + 1] = string.format("  %s: %s %s", v.name, v.dtype, shape_text(v.shape)) end
  out[#out + 1] = "Ops, in execution order (name: dtype shape = functional form  [category]):"
  for _, op in ipairs(g.ops) do
    local what = op.tensor == false and "tuple" or string.format("%s %s", op.dtype, shape_text(op.shape))
    out[#out + 1] = string.format("  %s: %s = %s  [%s]", op.name, what, M.readable(op.expr, op), op.category or "other")
  end
  local ps = {}
  for _, q in ipairs(a.used_params or {}) do
    local p = g.params[q] or {}
    ps[#ps + 1] = string.format("%s %s", q, shape_text(p.shape))
  end
  if #ps > 0 then out[#out + 1] = "Parameters and buffers read: " .. table.concat(ps, ", ") end
  out[#out + 1] = "Outputs: " .. table.concat(g.outputs, ", ")
  return table.concat(out, "\n")
end

-- borders(g, names) -> ops, inputs, outputs, params of a set of ops: the values read from outside (in
-- order of first use), the values read outside or returned by the model, the parameters read
function M.borders(g, names)
  local inside, list = {}, {}
  for _, n in ipairs(names) do inside[n] = true end
  for _, op in ipairs(g.ops) do if inside[op.name] then list[#list + 1] = op end end
  local ins, outs, params, seen, pseen = {}, {}, {}, {}, {}
  for _, op in ipairs(list) do
    for _, v in ipairs(op.inputs or {}) do
      local prod = g.values[v] and g.values[v].producer
      if not (prod and inside[prod]) and not seen[v] then seen[v] = true; ins[#ins + 1] = v end
    end
    for _, q in ipairs(op.params or {}) do
      if not pseen[q] then pseen[q] = true; params[#params + 1] = q end
    end
    local used_outside = g.is_output[op.name]
    for _, c in ipairs(g.consumers[op.name] or {}) do if not inside[c] then used_outside = true end end
    if used_outside then outs[#outs + 1] = op.name end
  end
  return list, ins, outs, params
end

local function label(i, sg)
  return string.format("subgraph %d (%s)", i, tostring(sg.name or "?"))
end

-- the declared border (inputs or outputs) against the traced one: names and shapes
local function check_border(g, why, where, kind, declared, actual)
  if type(declared) ~= "table" then
    why[#why + 1] = string.format("%s has no %s list", where, kind)
    return
  end
  local want, got = {}, {}
  for _, v in ipairs(actual) do want[v] = true end
  for _, d in ipairs(declared) do
    local name = type(d) == "table" and d.value or d
    if type(name) ~= "string" then
      why[#why + 1] = string.format("%s: an entry of %s has no \"value\" name", where, kind)
    else
      got[name] = true
      if not want[name] then
        why[#why + 1] = string.format("%s declares %s `%s`, which is not a value crossing its border (%s: %s)",
          where, kind == "inputs" and "input" or "output", name, kind, #actual > 0 and table.concat(actual, ", ") or "none")
      elseif type(d) ~= "table" or d.shape == nil then
        why[#why + 1] = string.format("%s %s `%s` has no shape", where, kind == "inputs" and "input" or "output", name)
      elseif not same_shape(d.shape, g.values[name].shape) then
        why[#why + 1] = string.format("%s %s `%s`: shape %s declared, the traced graph has %s", where,
          kind == "inputs" and "input" or "output", name, shape_text(d.shape), shape_text(g.values[name].shape))
      end
    end
  end
  for _, v in ipairs(actual) do
    if not got[v] then
      why[#why + 1] = string.format("%s %s `%s` but does not declare it as an %s", where,
        kind == "inputs" and "reads" or "produces, for use outside it,", v, kind == "inputs" and "input" or "output")
    end
  end
end

-- order(subgraphs) -> ids in an order where each runs after the ones it reads from, or nil and
-- a cycle as text. Ties go to the subgraph whose first op comes first.
local function order(sgs)
  local indeg = {}
  for _, s in ipairs(sgs) do indeg[s.id] = 0 end
  for _, s in ipairs(sgs) do for _ in pairs(s.deps) do indeg[s.id] = indeg[s.id] + 1 end end
  local out, done = {}, {}
  while #out < #sgs do
    local pick
    for _, s in ipairs(sgs) do
      if not done[s.id] and indeg[s.id] == 0 and (not pick or s.first < pick.first) then pick = s end
    end
    if not pick then
      local left = {}
      for _, s in ipairs(sgs) do if not done[s.id] then left[#left + 1] = s.id end end
      return nil, table.concat(left, ", ")
    end
    done[pick.id] = true
    out[#out + 1] = pick.id
    for _, s in ipairs(sgs) do if s.deps[pick.id] then indeg[s.id] = indeg[s.id] - 1 end end
  end
  return out
end

-- validate(analysis, plan) -> decomposition, or nil and the reasons (array of sentences).
-- plan: the decoded reply {subgraphs = {{name, ops, inputs, outputs, params?, fusion?}}}.
-- decomposition: {subgraphs = {{id, name, fusion, ops (names, execution order), inputs =
-- {{value, shape, dtype}}, outputs = {...}, params = {qualnames}, deps = {id = true}}}, order}
function M.validate(a, plan)
  local g = M.index(a)
  if type(plan) ~= "table" or type(plan.subgraphs) ~= "table" or #plan.subgraphs == 0 then
    return nil, { "the reply has no non-empty \"subgraphs\" array" }
  end
  local why, owner, sgs = {}, {}, {}
  for i, sg in ipairs(plan.subgraphs) do
    local where = label(i, type(sg) == "table" and sg or {})
    if type(sg) ~= "table" or type(sg.ops) ~= "table" or #sg.ops == 0 then
      why[#why + 1] = where .. " lists no ops"
    else
      for _, name in ipairs(sg.ops) do
        if type(name) ~= "string" or not g.op[name] then
          local what = g.values[name] and g.values[name].input and "a graph input, not an op" or "not an op of the traced graph"
          why[#why + 1] = string.format("%s names `%s`, which is %s", where, tostring(name), what)
        elseif owner[name] then
          why[#why + 1] = string.format("op `%s` is in %s and in %s", name, owner[name] == i and where or label(owner[name], plan.subgraphs[owner[name]]), where)
        else
          owner[name] = i
        end
      end
    end
  end
  -- an unknown or twice-listed op leaves the borders undefined; a missing one does not (it is
  -- outside every subgraph), so the borders are checked too and every reason is given at once
  if #why > 0 then return nil, why end
  local missing = {}
  for _, op in ipairs(g.ops) do if not owner[op.name] then missing[#missing + 1] = op.name end end
  if #missing > 0 then why[#why + 1] = "ops in no subgraph: " .. table.concat(missing, ", ") end

  for i, sg in ipairs(plan.subgraphs) do
    local where = label(i, sg)
    local ops, ins, outs, params = M.borders(g, sg.ops)
    check_border(g, why, where, "inputs", sg.inputs, ins)
    check_border(g, why, where, "outputs", sg.outputs, outs)
    if sg.params ~= nil then
      local declared, used = {}, {}
      for _, q in ipairs(type(sg.params) == "table" and sg.params or {}) do declared[type(q) == "table" and q.name or q] = true end
      for _, q in ipairs(params) do
        used[q] = true
        if not declared[q] then why[#why + 1] = string.format("%s uses parameter `%s` but does not list it", where, q) end
      end
      for q in pairs(declared) do
        if not used[q] then why[#why + 1] = string.format("%s lists parameter `%s`, which its ops do not read", where, tostring(q)) end
      end
    end
    if #outs == 0 then why[#why + 1] = where .. " produces nothing the rest of the model reads" end
    for _, v in ipairs(ins) do
      if not g.values[v].tensor then
        why[#why + 1] = string.format("%s reads `%s` from another subgraph, but it is not a tensor (a tuple): keep the ops that take it apart in the subgraph that makes it", where, v)
      end
    end
    local function border_list(names)
      local out = {}
      for k, v in ipairs(names) do out[k] = { value = v, shape = g.values[v].shape, dtype = g.values[v].dtype } end
      return out
    end
    local names = {}
    for k, op in ipairs(ops) do names[k] = op.name end
    sgs[i] = { id = "s" .. i, name = type(sg.name) == "string" and sg.name or ("subgraph_" .. i), fusion = sg.fusion,
      ops = names, inputs = border_list(ins), outputs = border_list(outs), params = params, deps = {},
      first = g.pos[names[1]] }
  end
  if #why > 0 then return nil, why end
  for _, s in ipairs(sgs) do
    for _, v in ipairs(s.inputs) do
      local prod = g.values[v.value].producer
      if prod then s.deps["s" .. owner[prod]] = true end
    end
  end
  local ord, cycle = order(sgs)
  if not ord then
    return nil, { "the subgraphs read each other's outputs in a cycle, so no order can run them (" .. cycle
      .. "): an op must not come after an op of a subgraph that itself needs its result" }
  end
  return { subgraphs = sgs, order = ord }
end

-- reasons_text(reasons) -> the refusal as one block for a prompt or a log
function M.reasons_text(why)
  local out = {}
  for i, w in ipairs(why) do out[i] = "- " .. w end
  return table.concat(out, "\n")
end

-- to_json(dec) -> the decomposition as written to fuse/subgraphs.json (deps as arrays)
function M.to_json(dec)
  local sgs = {}
  for i, s in ipairs(dec.subgraphs) do
    local deps = {}
    for d in pairs(s.deps) do deps[#deps + 1] = d end
    table.sort(deps)
    sgs[i] = { id = s.id, name = s.name, fusion = s.fusion or json.null, ops = s.ops, inputs = s.inputs,
      outputs = s.outputs, params = #s.params > 0 and s.params or json.empty_array,
      deps = #deps > 0 and deps or json.empty_array, kernel = s.kernel or json.null, signature = s.signature or json.null }
  end
  return { subgraphs = sgs, order = dec.order }
end

return M
