-- Code features of a candidate's source that skills' rules read next to the profile.
local M = {}

local function count(s, pat)
  local n = 0
  for _ in s:gmatch(pat) do n = n + 1 end
  return n
end

-- The problem's class of operation ("gemm"|"conv"|"pool"|"reduction"|"elementwise"), under which
-- skill memory is filed (skill outcomes, lessons' "op_" tags). It comes from the evaluator's
-- torch.fx trace of the problem (pool:analyze kind "ops": its ops counted by category, see
-- src/gpu/eval/README.md); the heaviest category present names it, in this order.
M.CLASS_OF_CATEGORY = {
  { "gemm", { "attention", "gemm", "recurrent" } },
  { "conv", { "conv", "conv_transpose" } },
  { "pool", { "pool" } },
  { "reduction", { "norm", "softmax", "reduction", "loss" } },
}

-- op_class_of_categories({category = count}) -> the op class of a traced problem
function M.op_class_of_categories(categories)
  for _, c in ipairs(M.CLASS_OF_CATEGORY) do
    for _, cat in ipairs(c[2]) do
      if (tonumber(categories[cat]) or 0) > 0 then return c[1] end
    end
  end
  return "elementwise"
end

-- traced_op_class(pool, problem_path, dtype, timeout) -> op class from the problem's FX trace, or
-- nil, why (the evaluator could not trace it)
function M.traced_op_class(pool, path, dtype, timeout)
  local a = pool:analyze({ kind = "ops", problem = path, dtype = dtype, timeout = timeout })
  if not (a and a.ok and a.traced and type(a.categories) == "table") then
    return nil, tostring(a and (a.trace_error or a.error) or "no analysis")
  end
  return M.op_class_of_categories(a.categories)
end

-- problem_op_class(pool, path, code, dtype, timeout) -> op class, "trace" | "source": from the
-- trace where the pool can analyze and the problem traces, else guessed from the source
function M.problem_op_class(pool, path, code, dtype, timeout)
  if pool and pool.analyze and path then
    local c, why = M.traced_op_class(pool, path, dtype, timeout)
    if c then return c, "trace" end
    require("kagent.log").info("op class of %s guessed from its source: no trace (%s)", path, why)
  end
  return M.op_class(code), "source"
end

-- op_class(problem_src) -> the op class guessed from the problem's source text: only where no
-- trace exists (the evaluator could not trace the problem; a run table built by a test)
function M.op_class(src)
  src = src or ""
  if src:find("matmul") or src:find("torch%.mm") or src:find("nn%.Linear") or src:find("bmm") or src:find("[^@]@[^@]") then return "gemm" end
  if src:find("[Cc]onv") then return "conv" end
  if src:find("[Pp]ool") then return "pool" end
  if src:find("mean") or src:find("sum") or src:find("norm") or src:find("[Ss]oftmax") or src:find("max%(") then return "reduction" end
  return "elementwise"
end

-- code_only(src) -> src without docstrings and comments, so a kernel saying "no torch.matmul
-- here" in a docstring is not read as calling it
function M.code_only(src)
  src = (src or ""):gsub('""".-"""', ""):gsub("\'\'\'.-\'\'\'", "")
  local lines = {}
  for line in (src .. "\n"):gmatch("([^\n]*)\n") do lines[#lines + 1] = (line:gsub("^%s*#.*$", ""):gsub("%s+#[^\"']*$", "")) end
  return table.concat(lines, "\n")
end

-- extract(code, problem_src, dtype, op_class) -> features table. op_class: the run's (from the
-- problem's trace); guessed from problem_src where not given
function M.extract(code, problem_src, dtype, op_class)
  code = M.code_only(code)
  local f = {}
  f.triton = code:find("@triton%.jit") ~= nil
  f.n_kernels = count(code, "@triton%.jit")
  f.autotune = code:find("triton%.autotune") ~= nil
  f.tl_dot = code:find("tl%.dot") ~= nil
  f.loops = code:find("for%s+[%w_]+%s+in%s+") ~= nil
  f.static_range = code:find("static_range") ~= nil
  f.masked_loads = code:find("mask%s*=") ~= nil
  f.divmod = code:find("[^/]//[^/]") ~= nil or code:find("%s%%%s") ~= nil
  f.transcendental = code:find("tl%.exp") or code:find("tl%.log") or code:find("sqrt") or code:find("rsqrt")
  f.transcendental = f.transcendental and true or false
  f.torch_compute = (code:find("torch%.matmul") or code:find("F%.conv") or code:find("torch%.nn%.functional")) and true or false
  f.op_class = op_class or M.op_class(problem_src)
  local low = (problem_src or ""):lower()
  -- a matrix-vector product streams its matrix once (no reuse); a depthwise convolution has no
  -- channel reduction (a stencil, not a GEMM)
  f.gemv = f.op_class == "gemm" and (low:find("matrix%-vector") or (problem_src or ""):find("rand%([%w_]+,%s*1%)")) and true or false
  f.depthwise = f.op_class == "conv" and (low:find("depthwise") or low:find("groups%s*=%s*in_channels")) and true or false
  f.reuse = (f.op_class == "gemm" and not f.gemv) or (f.op_class == "conv" and not f.depthwise)
  f.dtype = dtype
  local tun = require("agents.lib.tunables").find(code)
  f.tunables = #tun
  f.passes = count(code, "tl%.load")
  return f
end

return M
