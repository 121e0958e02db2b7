-- Composer role (agents/fuse.lua): the subgraph kernels joined into one program whose forward
-- calls only them, in the decomposition's order, verified against the original model. The
-- sources are merged by the evaluator (pool:analyze, kind "merge": each kernel's module-level
-- names get a prefix), the forward is written here from the decomposition, and the program is
-- accepted only when (1) the evaluator verifies it against the model, with the kernel audit of
-- the run's job (on a GPU: the share of time in library kernels), (2) its forward, traced with
-- the kernels as leaves, makes no call but the kernels (pool:analyze, kind "forward"), and (3)
-- the static checks find no torch compute in its wrapper.
local json = require("kagent.json")
local verdict = require("agents.lib.verdict")
local subproblem = require("agents.lib.subproblem")
local baselines_lib = require("agents.lib.baselines")

local M = {}

-- attr(q) -> Python that reaches the parameter `q` ("network.0.weight") from self
local function attr(q)
  local expr = "self"
  for part in q:gmatch("[^.]+") do
    if part:match("^[%a_][%w_]*$") then expr = expr .. "." .. part else expr = string.format("getattr(%s, '%s')", expr, part) end
  end
  return expr
end
M.attr = attr

-- forward(analysis, dec, entries) -> the composed ModelNew (and its helper) as Python source.
-- entries: {[kernel dir] = {kind = "ModelNew"|"kernel_function", name}}
function M.forward(a, dec, entries)
  local by_id, locals = {}, {}
  for _, s in ipairs(dec.subgraphs) do by_id[s.id] = s end
  for _, v in ipairs(a.inputs or {}) do locals[v.name] = v.name end
  local function value(name)
    local l = locals[name]
    if not l then error("composer: value " .. tostring(name) .. " is used before any subgraph makes it") end
    return l
  end
  local init, body, instances = {}, {}, {}
  for _, q in ipairs(a.used_params or {}) do
    local p = (a.params or {})[q] or {}
    local dt = p.dtype or "float32"
    local empty = string.format("torch.empty(%s%s)", subproblem.tuple(p.shape), subproblem.FLOATS[dt] and "" or (", dtype=torch." .. dt))
    init[#init + 1] = string.format("        _fuse_register(self, '%s', %s)", q,
      p.kind == "buffer" and empty or ("torch.nn.Parameter(" .. empty .. ", requires_grad=False)"))
  end
  for _, id in ipairs(dec.order) do
    local s = by_id[id]
    local e = entries[s.kernel] or error("composer: no kernel for " .. tostring(s.kernel))
    local call = e.name
    if e.kind == "ModelNew" then
      call = "self.k_" .. s.kernel
      if not instances[s.kernel] then
        instances[s.kernel] = true
        init[#init + 1] = string.format("        self.k_%s = %s()", s.kernel, e.name)
      end
    end
    local args = {}
    for i, arg in ipairs(s.args) do args[i] = arg.kind == "param" and attr(arg.name) or value(arg.name) end
    local outs = {}
    for i, v in ipairs(s.out_values) do
      locals[v] = "v_" .. v
      outs[i] = locals[v]
    end
    body[#body + 1] = string.format("        %s = %s(%s)  # %s: %s", table.concat(outs, ", "), call,
      table.concat(args, ", "), s.id, table.concat(s.ops, ", "))
  end
  local ret = (a.output_expr or "None"):gsub("%${([vp]):([^}]+)}", function(kind, ref)
    return kind == "v" and value(ref) or attr(ref)
  end)
  local params = {}
  for _, p in ipairs(a.placeholders or a.inputs or {}) do params[#params + 1] = p.name end
  return table.concat({
    "",
    "",
    "# ---- the composed program (agents/fuse.lua): the model's forward from the kernels above ----",
    "def _fuse_register(root, qualname, value):",
    "    \"\"\"Registers a parameter or buffer under the model's own dotted name, so the model's",
    "    values are what the kernels receive.\"\"\"",
    "    *path, leaf = qualname.split('.')",
    "    module = root",
    "    for part in path:",
    "        if part not in module._modules:",
    "            module.add_module(part, torch.nn.Module())",
    "        module = module._modules[part]",
    "    if isinstance(value, torch.nn.Parameter):",
    "        module.register_parameter(leaf, value)",
    "    else:",
    "        module.register_buffer(leaf, value)",
    "",
    "",
    "class ModelNew(torch.nn.Module):",
    "    def __init__(self, *args, **kwargs):",
    "        super().__init__()",
    #init > 0 and table.concat(init, "\n") or "        pass",
    "",
    "    def forward(self" .. (#params > 0 and (", " .. table.concat(params, ", ")) or "") .. "):",
    table.concat(body, "\n"),
    "        return " .. ret,
    "",
  }, "\n")
end

-- program(run, a, dec, unique) -> code, or nil, error. unique: {{dir, code (the kernel)}}
function M.program(run, a, dec, unique)
  local parts = {}
  for i, u in ipairs(unique) do parts[i] = { prefix = "sg" .. u.k .. "_", source = u.kernel_code, label = u.dir } end
  local m = run.pool:analyze({ kind = "merge", parts = parts })
  if not m.ok then return nil, tostring(m.error) end
  if m.imports and m.imports.torch and m.imports.torch ~= "torch" then
    return nil, "a kernel binds the name `torch` to " .. tostring(m.imports.torch)
  end
  local entries = {}
  for i, u in ipairs(unique) do entries[u.dir] = m.entries[i] end
  local head = (m.imports and m.imports.torch) and "" or "import torch\n"
  local ok, tail = pcall(M.forward, a, dec, entries)
  if not ok then return nil, tostring(tail) end
  return "# Composed by agents/fuse.lua from the verified subgraph kernels (fuse/sg_<k>/best_kernel.py).\n"
    .. head .. m.source .. tail
end

-- proof(result, hot) -> {ok, reasons, audit, static_findings, hot_path}: what shows that no torch
-- compute op is left on the composed program's hot path
function M.proof(r, hot)
  local reasons = {}
  local audit = type(r.audit) == "table" and r.audit or {}
  local static = {}
  for _, f in ipairs(audit.static_findings or {}) do
    if f.rule == "torch_compute_in_wrapper" or f.rule == "calls_reference" then
      static[#static + 1] = f
      reasons[#reasons + 1] = string.format("static check %s at line %s: %s", f.rule, tostring(f.line), tostring(f.text))
    end
  end
  if not hot.ok or not hot.traced then
    reasons[#reasons + 1] = "the composed forward could not be traced: " .. tostring(hot.trace_error or hot.error)
  end
  for _, c in ipairs(hot.foreign or {}) do
    reasons[#reasons + 1] = string.format("the forward calls %s (%s), which is not a subgraph kernel", tostring(c.target), tostring(c.op))
  end
  if audit.applicable and audit.fallback then
    reasons[#reasons + 1] = "the kernel audit found library kernels on the hot path: "
      .. table.concat(audit.flagged_kernels or {}, ", ")
  end
  return { ok = #reasons == 0, reasons = #reasons > 0 and reasons or json.empty_array,
    audit = audit.applicable and { own_time_frac = audit.own_time_frac, fallback = audit.fallback,
      flagged_kernels = audit.flagged_kernels or json.empty_array, threshold = audit.threshold }
      or "not applicable in CPU mode (candidates are PyTorch there): the static checks and the traced forward stand in",
    static_findings = #static > 0 and static or json.empty_array,
    hot_path = { traced = hot.traced == true, kernel_calls = hot.kernel_calls, foreign = hot.foreign or json.empty_array } }
end

-- compose(run, a, dec, unique) -> {ok, code, result, hot, proof, error}. Writes
-- compose/composed_kernel.py, compose/verify.json and compose/hot_path.json.
function M.compose(run, a, dec, unique)
  local code, err = M.program(run, a, dec, unique)
  if not code then return { ok = false, error = "the kernels could not be joined: " .. err } end
  local path = run.rd:path("compose/composed_kernel.py")
  run.rd:write(path, code)
  local baselines = run.opts.max_autotune and baselines_lib.all(run) or baselines_lib.reported(run)
  local r = run.pool:evaluate(run.job(code, { bench = { baselines = baselines } }))
  run.rd:write("compose/verify.json", r)
  local hot = run.pool:analyze({ kind = "forward", problem = run.problem_path, candidate = path, dtype = run.dtype })
  run.rd:write("compose/hot_path.json", hot)
  local proof = M.proof(r, hot)
  local out = { ok = verdict.verified(r) and proof.ok, code = code, path = path, result = r, hot = hot, proof = proof }
  if not verdict.verified(r) then
    out.error = string.format("the composed program fails against the model at stage %s: %s", tostring(r.stage),
      tostring(r.error or "verified but not timed"))
  elseif not proof.ok then
    out.error = "the composed program has torch compute on its hot path: " .. table.concat(proof.reasons, "; ")
  end
  return out
end

return M
