-- A subgraph of a decomposition as a KernelBench problem of its own (agents/fuse.lua): a Model
-- without parameters whose forward takes the values flowing into the subgraph, then the model's
-- parameters it reads, and computes the subgraph's ops in their functional form (from the
-- evaluator's analysis), with get_inputs drawing values of the traced shapes and spread. Names
-- inside are positional (x0.., p0_weight.., v0..), so two subgraphs that compute the same thing
-- on the same shapes give the same Model: its hash is the signature that de-duplicates them.
local fingerprint = require("agents.lib.fingerprint")
local decomposition = require("agents.lib.decomposition")

local M = {}

local function tuple(shape)
  local parts = {}
  for i, d in ipairs(shape or {}) do parts[i] = tostring(math.floor(d)) end
  if #parts == 1 then return "(" .. parts[1] .. ",)" end
  return "(" .. table.concat(parts, ", ") .. ")"
end
M.tuple = tuple

local FLOATS = { float32 = true, float16 = true, bfloat16 = true, float64 = true }
M.FLOATS = FLOATS

-- the imports every generated subgraph file starts with (its code and first kernels use them)
M.IMPORTS = "import math\nimport operator\n\nimport torch\nimport torch.nn as nn\n"

-- input_expr(meta) -> Python that draws a tensor like the traced value (shape, dtype, spread)
function M.input_expr(meta)
  local shape, dt = tuple(meta.shape), meta.dtype or "float32"
  if dt == "bool" then return "torch.rand(" .. shape .. ") < 0.5" end
  if FLOATS[dt] then
    local mean, std = tonumber(meta.mean) or 0, tonumber(meta.std) or 0
    -- a constant value (a zero bias) would let a kernel that ignores it pass: give it spread
    if std < 1e-12 then std = math.max(math.abs(mean), 1) * 0.1 end
    return string.format("torch.randn(%s) * %.6g %s %.6g", shape, std, mean < 0 and "-" or "+", math.abs(mean))
  end
  local lo, hi = math.floor(tonumber(meta.min) or 0), math.floor(tonumber(meta.max) or 1)
  return string.format("torch.randint(%d, %d, %s, dtype=torch.%s)", lo, hi + 1, shape, dt)
end

-- build(analysis, sg, where) -> {code, body, signature, args = {{kind = "value"|"param", name}},
-- outputs = {value names}, function_body (the ops as `kernel_function`, layers at module level)}. where = {id, problem} names the subgraph in the file's header.
function M.build(a, sg, where)
  local g = decomposition.index(a)
  local names, pnames, args, sig_args = {}, {}, {}, {}
  local arg_names, draws = {}, {}
  for i, v in ipairs(sg.inputs) do
    local n = "x" .. (i - 1)
    names[v.value] = n
    arg_names[#arg_names + 1] = n
    args[#args + 1] = { kind = "value", name = v.value }
    local meta = g.values[v.value]
    draws[#draws + 1] = string.format("        %s,  # %s", M.input_expr(meta.meta), v.value)
    sig_args[#sig_args + 1] = decomposition.shape_text(meta.shape) .. " " .. tostring(meta.dtype)
  end
  for i, q in ipairs(sg.params) do
    local leaf = (q:match("([^.]+)$") or q):gsub("[^%w_]", "_")
    local n = string.format("p%d_%s", i - 1, leaf)
    pnames[q] = n
    arg_names[#arg_names + 1] = n
    args[#args + 1] = { kind = "param", name = q }
    local meta = g.params[q] or {}
    draws[#draws + 1] = string.format("        %s,  # %s", M.input_expr(meta), q)
    sig_args[#sig_args + 1] = decomposition.shape_text(meta.shape) .. " " .. tostring(meta.dtype)
  end
  local init, lines = {}, {}
  for k, name in ipairs(sg.ops) do
    local op = g.op[name]
    local expr = op.expr:gsub("%${([vp]):([^}]+)}", function(kind, ref)
      local n = kind == "v" and names[ref] or pnames[ref]
      if not n then error(string.format("subgraph %s: op %s reads %s, which is neither an input nor computed inside", where.id, name, ref)) end
      return n
    end)
    if op.module_ctor then
      local m = "m" .. #init
      init[#init + 1] = string.format("        self.%s = %s", m, op.module_ctor)
      expr = expr:gsub("%${m}", "self." .. m)
    end
    names[name] = "v" .. (k - 1)
    lines[#lines + 1] = string.format("        %s = %s  # %s", names[name], expr, name)
  end
  local outs = {}
  for i, v in ipairs(sg.outputs) do outs[i] = names[v.value] end
  local model = { "class Model(nn.Module):", "    def __init__(self):", "        super().__init__()" }
  for _, l in ipairs(init) do model[#model + 1] = l end
  model[#model + 1] = ""
  model[#model + 1] = "    def forward(self, " .. table.concat(arg_names, ", ") .. "):"
  for _, l in ipairs(lines) do model[#model + 1] = l end
  model[#model + 1] = "        return " .. (#outs == 1 and outs[1] or ("(" .. table.concat(outs, ", ") .. ")"))
  model = table.concat(model, "\n")
  -- the hash leaves out comments (original op names) and the draws: only what is computed, on what
  local signature = fingerprint.hash(fingerprint.normalize(model) .. "\n" .. table.concat(sig_args, "\n"))
  local ops_text = table.concat(sg.ops, ", ")
  local code = table.concat({
    string.format("# Subgraph %s of %s, written by agents/fuse.lua: ops %s.", where.id, where.problem, ops_text),
    "# One fused piece of a larger model, as a problem of its own. Its inputs are the values that",
    "# flow into it (data first, then the model's parameters, passed in as inputs) with their",
    "# traced shapes; it returns the values the rest of the model reads. Write one kernel for",
    "# the whole subgraph.",
    M.IMPORTS,
    "",
    model,
    "",
    "",
    "def get_inputs():",
    "    return [",
    table.concat(draws, "\n"),
    "    ]",
    "",
    "",
    "def get_init_inputs():",
    "    return []",
    "",
  }, "\n")
  local out_values = {}
  for i, v in ipairs(sg.outputs) do out_values[i] = v.value end
  -- the same ops as a plain function, its layers built once at module level: the kernel of the
  -- reference's own operations (agents/flows/first_kernel.lua), called with no module in between
  local fn = {}
  for k, l in ipairs(init) do fn[#fn + 1] = (l:gsub("^%s+self%.m(%d+) = ", "_m%1 = ")) end
  fn[#fn + 1] = ""
  fn[#fn + 1] = ""
  fn[#fn + 1] = "def kernel_function(" .. table.concat(arg_names, ", ") .. "):"
  for _, l in ipairs(lines) do fn[#fn + 1] = (l:gsub("self%.m(%d+)", "_m%1")) end
  fn[#fn + 1] = "    return " .. (#outs == 1 and outs[1] or ("(" .. table.concat(outs, ", ") .. ")"))
  local fn_lines = {}
  for i, l in ipairs(fn) do fn_lines[i] = (l:gsub("^        ", "    ")) end
  return { code = code, body = model, signature = signature, args = args, outputs = out_values,
    function_body = table.concat(fn_lines, "\n") }
end

-- dedupe(analysis, dec, problem) -> unique: array of {k, dir = "sg_<k>", signature, code,
-- occurrences = {subgraph ids}, categories = {the analysis's op categories in it = true}}; each
-- subgraph gets .kernel (its unique's dir), .signature, .args and .out_values. Unique subgraphs
-- are numbered in execution order.
function M.dedupe(a, dec, problem)
  local unique, by_sig = {}, {}
  local by_id, category = {}, {}
  for _, s in ipairs(dec.subgraphs) do by_id[s.id] = s end
  for _, op in ipairs(a.ops or {}) do category[op.name] = op.category end
  for _, id in ipairs(dec.order) do
    local s = by_id[id]
    local b = M.build(a, s, { id = s.id, problem = problem })
    s.signature, s.args, s.out_values = b.signature, b.args, b.outputs
    local u = by_sig[b.signature]
    if not u then
      u = { k = #unique + 1, signature = b.signature, code = b.code, occurrences = {}, categories = {} }
      u.dir = "sg_" .. u.k
      for _, name in ipairs(s.ops or {}) do
        if category[name] then u.categories[category[name]] = true end
      end
      unique[#unique + 1], by_sig[b.signature] = u, u
    end
    u.function_body = u.function_body or b.function_body
    table.insert(u.occurrences, s.id)
    s.kernel = u.dir
  end
  return unique
end

return M
