-- The LLM-free floor of agents/fuse.lua: its first program is the fastest verified one of up to
-- three candidate programs, each composed, verified against the model and timed beside eager and
-- torch.compile by the composer's evaluator job, as any candidate (docs/agents.md, "fuse.lua"):
--   split        — the splitter's subgraphs, each with its first kernel (agents/flows/
--                  fuse_sessions.lua): the program an LLM's kernels replace piece by piece.
--   whole        — the whole problem as one subgraph, with the code Inductor emits for it: what
--                  torch.compile runs, so the floor does not fall below torch.compile for want of
--                  Inductor's fusion and layouts across the splitter's borders. Tried where the
--                  split has several subgraphs (with one, the split is the whole problem).
--   max-autotune — the whole problem compiled with max-autotune, GEMM backends ATen and Triton
--                  (first_kernel's inductor_max_autotune: cuBLAS/cuDNN stay a choice), where it
--                  has a GEMM or a convolution: where max-autotune's choice of kernels is faster,
--                  the floor takes it.
-- The whole-problem candidates need Inductor: not in CPU mode, nor with --first reference, nor
-- for a recurrent layer (first_kernel.RECURRENT_WHY). `--floor` lists the candidates.
local json = require("kagent.json")
local log = require("kagent.log")
local decomposition = require("agents.lib.decomposition")
local subproblem = require("agents.lib.subproblem")
local first_kernel = require("agents.flows.first_kernel")

local M = {}

M.SOURCES = { "split", "whole", "max-autotune" }
M.DEFAULT = "split,whole,max-autotune"
-- the op categories max-autotune chooses kernels for (its GEMM and convolution templates)
M.TUNED = { gemm = true, conv = true, conv_transpose = true }
-- each whole-problem candidate: its folder under fuse/ and first/, and its first-kernel sources
M.WHOLE = {
  whole = { dir = "whole", order = { "inductor", "inductor_eager_layout" } },
  ["max-autotune"] = { dir = "whole_max_autotune", order = { "inductor_max_autotune" } },
}

-- parse(text) -> the candidates listed (a set), or nil and why. `split` must be among them: its
-- subgraph kernels are what an LLM's kernels replace.
function M.parse(text)
  local set, known = {}, {}
  for _, s in ipairs(M.SOURCES) do known[s] = true end
  for item in tostring(text or ""):gmatch("[^,]+") do
    local s = item:match("^%s*(.-)%s*$")
    if not known[s] then
      return nil, string.format("--floor: unknown candidate `%s` in `%s` (the candidates are %s)", s, tostring(text),
        table.concat(M.SOURCES, ", "))
    end
    set[s] = true
  end
  if not set.split then
    return nil, string.format("--floor %s: `split` must be listed (the subgraphs' first kernels, which an LLM's "
      .. "kernels replace); `--floor split` tries it alone", tostring(text))
  end
  return set
end

-- whole_dec(a) -> the decomposition of analysis `a` into one subgraph holding every op (checked
-- as any decomposition), or nil and why
function M.whole_dec(a)
  local g = decomposition.index(a)
  local names = {}
  for i, op in ipairs(g.ops) do names[i] = op.name end
  if #names == 0 then return nil, "the traced graph has no ops" end
  local _, ins, outs, params = decomposition.borders(g, names)
  local function border(list)
    local out = {}
    for k, v in ipairs(list) do out[k] = { value = v, shape = g.values[v].shape, dtype = g.values[v].dtype } end
    return out
  end
  local dec, why = decomposition.validate(a, { subgraphs = { { name = "whole", ops = names, inputs = border(ins),
    outputs = border(outs), params = params, fusion = "the whole problem" } } })
  if not dec then return nil, "the whole problem is not one valid subgraph: " .. table.concat(why, "; ") end
  return dec
end

local function categories(a)
  local c = {}
  for _, op in ipairs(a.ops or {}) do if op.category then c[op.category] = true end end
  return c
end

-- plan(run, a, dec) -> the candidates in order: {{source, skipped = why or nil}}; the split first,
-- then those of --floor, each with why it is not tried where it is not
function M.plan(run, a, dec)
  local set = M.parse(run.opts.floor or M.DEFAULT) or { split = true }
  local out = { { source = "split" } }
  local cpu = run.devices and run.devices[1] and run.devices[1].mode == "cpu"
  local inductor = false
  for _, s in ipairs(first_kernel.order(run)) do if s == "inductor" then inductor = true end end
  local cat = categories(a)
  for _, src in ipairs({ "whole", "max-autotune" }) do
    if set[src] then
      local why
      if cpu then why = "CPU mode: no Inductor code (the reference ops are the floor)"
      elseif not inductor then why = "--first " .. tostring(run.opts.first) .. ": no Inductor source"
      elseif cat.recurrent then why = first_kernel.RECURRENT_WHY
      elseif src == "whole" and dec and #dec.subgraphs == 1 then why = "the split is one subgraph: the whole problem already"
      elseif src == "max-autotune" and run.opts.first_library == "deny" then
        why = "--first-library deny: the first kernels are max-autotune's Triton templates already"
      elseif src == "max-autotune" then
        why = "no GEMM or convolution for max-autotune to choose kernels for"
        for c in pairs(M.TUNED) do if cat[c] then why = nil end end
      end
      out[#out + 1] = { source = src, skipped = why }
    end
  end
  return out
end

-- pick(cands) -> the candidate kept: the fastest verified one (the earlier on a tie: the split
-- first), or nil where none verified
function M.pick(cands)
  local best
  for _, c in ipairs(cands) do
    local t = c.program and c.program.ok and c.program.result and c.program.result.time_ms
      and c.program.result.time_ms.median
    if t and (not best or t < best.program.result.time_ms.median) then best = c end
  end
  return best
end

-- whole_program(run, st, cand, deps) -> the composed program of a whole-problem candidate, or nil
-- and why. deps.first(run, u, path, out, order) and deps.compose(view, a, dec, unique, dir) are
-- fuse_sessions.first and the composition (agents/flows/fuse.lua gives them).
local function whole_program(run, st, cand, deps)
  local w = M.WHOLE[cand.source]
  local dec, why = M.whole_dec(st.analysis)
  if not dec then return nil, why end
  local unique = subproblem.dedupe(st.analysis, dec, run.problem_path)
  local u = unique[1]
  u.dir = w.dir
  for _, s in ipairs(dec.subgraphs) do s.kernel = w.dir end
  local path = run.rd:path("fuse/" .. w.dir .. "/problem.py")
  run.rd:write(path, u.code)
  local out = { dir = w.dir }
  deps.first(run, u, path, out, w.order)
  cand.kernel = out.first
  if not u.first then return nil, "no first kernel: " .. tostring(out.first and out.first.error) end
  u.kernel_code = u.first.code
  local fp = deps.compose(run, st.analysis, dec, unique, "first_" .. w.dir)
  if not fp.ok then return nil, tostring(fp.error) end
  return fp
end

-- choose(run, st, split_fp, deps) -> the first program kept (the split's composed program
-- split_fp, nil where it was not made, or a whole-problem one), or nil. st.floor = {source,
-- candidates = {{source, skipped, verified, time_ms, error, kernel, path}}} says what was tried.
function M.choose(run, st, split_fp, deps)
  local cands = M.plan(run, st.analysis, st.dec)
  for _, c in ipairs(cands) do
    if c.source == "split" then
      c.program, c.path = split_fp, "first/compose/composed_kernel.py"
      if not split_fp then c.error = "no split program (a subgraph without a first kernel)" end
      local srcs, seen = {}, {}
      for _, o in ipairs(st.sessions or {}) do
        local s = o.first and o.first.source
        if s and not seen[s] then seen[s] = true; srcs[#srcs + 1] = s end
      end
      if #srcs > 0 then c.kernel = { source = table.concat(srcs, "+") } end
    elseif not c.skipped then
      local fp, why = whole_program(run, st, c, deps)
      c.program, c.error = fp, why
      c.path = "first_" .. M.WHOLE[c.source].dir .. "/compose/composed_kernel.py"
      if why then log.warn("floor: the %s candidate gave no program: %s", c.source, tostring(why)) end
    end
  end
  local best = M.pick(cands)
  st.floor = { source = best and best.source or json.null, candidates = {} }
  for i, c in ipairs(cands) do
    local p = c.program
    local ok = p ~= nil and p.ok == true
    st.floor.candidates[i] = { source = c.source, skipped = c.skipped or json.null,
      verified = ok, time_ms = ok and p.result.time_ms.median or json.null,
      error = c.error or (p and not ok and tostring(p.error)) or json.null,
      kernel = c.kernel and c.kernel.source or json.null, path = p and c.path or json.null }
  end
  if best then
    best.program.floor_source, best.program.path_rel = best.source, best.path
    if best.source ~= "split" then
      log.info("floor: the %s program (%.4f ms) is kept over the split's%s", best.source,
        best.program.result.time_ms.median, (split_fp and split_fp.ok) and string.format(" (%.4f ms)",
          split_fp.result.time_ms.median) or "")
    end
    return best.program
  end
  return split_fp
end

return M
