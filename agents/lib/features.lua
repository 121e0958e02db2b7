-- Code features of a candidate's source that skills' rules read next to the profile.
local M = {}

local function count(s, pat)
  local n = 0
  for _ in s:gmatch(pat) do n = n + 1 end
  return n
end

-- op_class(problem_src) -> "gemm"|"conv"|"pool"|"reduction"|"elementwise"
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

-- extract(code, problem_src, dtype) -> features table
function M.extract(code, problem_src, dtype)
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
  f.op_class = M.op_class(problem_src)
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
