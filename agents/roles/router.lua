-- Router role (agents/fuse.lua): the direct path (one program for the whole forward, written
-- by the generation workers) or the decompose path (the model split into subgraphs, a kernel
-- generated and verified for each, then composed). Decided from the evaluator's static analysis
-- of the model (pool:analyze: op counts and kinds, control flow, attention, transposed
-- convolutions, parameter sizes) and, optionally, an LLM's vote; a later run on the same problem
-- (by its hash) reuses the decision that produced a verified program, as kept in memory.
local json = require("kagent.json")
local decomposition = require("agents.lib.decomposition")

local reply_json = require("agents.run.reply_json")

local M = {}

-- ops whose kernels are hard to write: several of them in one kernel is a hard kernel
M.HEAVY = { gemm = true, conv = true, conv_transpose = true, attention = true, recurrent = true }
-- ops that follow a heavy op for free in the same kernel (its epilogue)
M.EPILOGUE = { elementwise = true, activation = true, view = true }
-- the weight of an LLM's vote against the rules' score; a tie goes to the vote
M.VOTE_WEIGHT = 2
M.LARGE_PARAMS = 256 * 2 ^ 20

-- an op reached from `name` in at most `steps` steps through epilogue ops (back via first
-- inputs, or forward via consumers) that is of category `cat`
local function reaches(g, name, cat, steps, forward)
  local frontier = { name }
  for _ = 1, steps do
    local next_ = {}
    for _, n in ipairs(frontier) do
      local nexts = forward and (g.consumers[n] or {}) or ((g.op[n] or {}).inputs or {})
      for _, m in ipairs(nexts) do
        local op = g.op[m]
        if op then
          if op.category == cat then return true end
          if M.EPILOGUE[op.category] then next_[#next_ + 1] = m end
        end
      end
    end
    frontier = next_
  end
  return false
end

-- features(analysis) -> what the rules read
function M.features(a)
  local g = decomposition.index(a)
  local f = { traced = a.traced == true, control_flow = a.control_flow == true, decomposable = a.decomposable == true,
    ops = #g.ops, compute_ops = 0, heavy = 0, categories = {}, param_bytes = a.param_bytes or 0,
    attention = false, conv_transpose = false, reductions = 0 }
  for _, mt in ipairs(a.module_types or {}) do
    if mt == "MultiheadAttention" then f.attention = true end
    if mt:match("^ConvTranspose") then f.conv_transpose = true end
  end
  for _, op in ipairs(g.ops) do
    local c = op.category or "other"
    f.categories[c] = (f.categories[c] or 0) + 1
    if c ~= "view" then f.compute_ops = f.compute_ops + 1 end
    if M.HEAVY[c] then f.heavy = f.heavy + 1 end
    if c == "attention" then f.attention = true end
    if c == "conv_transpose" then f.conv_transpose = true end
    if c == "norm" or c == "softmax" or c == "reduction" or c == "pool" then f.reductions = f.reductions + 1 end
    -- attention written out: a softmax between two products of activations
    if c == "softmax" and reaches(g, op.name, "gemm", 4, false) and reaches(g, op.name, "gemm", 4, true) then
      f.attention = true
    end
  end
  f.epilogue_only = f.heavy == 1 and f.reductions == 0
  return f
end

-- static(analysis) -> {path, score, reasons, hard}: hard when the other path is impossible
function M.static(a)
  local f = M.features(a)
  local function hard(why) return { path = "direct", score = 0, reasons = { why }, hard = true, features = f } end
  if not f.traced then
    return hard("the model could not be traced (" .. tostring(a.trace_error or "?") .. "), so it cannot be split")
  end
  if not f.decomposable then
    local u = (a.unsupported or {})[1] or {}
    return hard("the traced graph cannot be split: " .. tostring(u.reason or "no functional form")
      .. (u.node and u.node ~= json.null and (" (op " .. tostring(u.node) .. ")") or ""))
  end
  if f.compute_ops <= 1 then return hard("one compute op: there is nothing to split") end
  local score, reasons = 0, {}
  local function rule(points, why) score = score + points; reasons[#reasons + 1] = string.format("%+d %s", points, why) end
  if f.heavy >= 2 then rule(2, f.heavy .. " heavy ops (GEMM, convolution, attention): one kernel for all of them is hard to write and verify") end
  if f.attention then rule(2, "an attention block") end
  if f.conv_transpose then rule(1, "a transposed convolution") end
  if f.compute_ops > 6 then rule(1, f.compute_ops .. " compute ops") end
  if f.heavy >= 1 and f.reductions > 0 then rule(1, "a reduction (normalization, softmax, pooling) over a heavy op's output needs a pass of its own") end
  if f.epilogue_only then rule(-2, "one heavy op with an elementwise epilogue: one fused kernel is the natural answer") end
  if f.heavy == 0 then rule(-1, "no heavy op: the elementwise ops and reductions fit in one kernel") end
  if f.param_bytes > M.LARGE_PARAMS then rule(1, string.format("%.0f MiB of parameters", f.param_bytes / 2 ^ 20)) end
  return { path = score > 0 and "decompose" or "direct", score = score, reasons = reasons, hard = false, features = f }
end

-- vote(run, analysis, static) -> {route, reason, prompt, reply} (route nil when the reply did not
-- give one; error set when the call failed)
function M.vote(run, a, s)
  local f = s.features
  local cats = {}
  for c, n in pairs(f.categories) do cats[#cats + 1] = c .. " " .. n end
  table.sort(cats)
  local vars = {
    graph = decomposition.text(a),
    analysis = string.format("%d ops (%d compute): %s; heavy ops %d; attention %s; transposed convolution %s; parameters %.1f MiB",
      f.ops, f.compute_ops, table.concat(cats, ", "), f.heavy, tostring(f.attention), tostring(f.conv_transpose), f.param_bytes / 2 ^ 20),
    static_path = s.path, score = s.score, static_reasons = #s.reasons > 0 and table.concat(s.reasons, "; ") or "none",
  }
  local q = run.ask({ tag = "route", template = "route", vars = vars, shared = run.problem_block(), parse = function(text)
    local v, how, code = reply_json.json(text, { fields = { "route" } })
    if v and v.route ~= "direct" and v.route ~= "decompose" then
      local r = type(v.route) == "string" and v.route:lower():match("(decompose)") or type(v.route) == "string" and v.route:lower():match("(direct)")
      if not r then return nil, "EPARSE: the reply gave no route (\"direct\" or \"decompose\")", "EPARSE" end
      v.route, how = r, "repaired"
    end
    return v, how, code
  end })
  local out = { prompt = q.prompt, reply = q.reply }
  if not q.res then out.error = tostring(q.error); return out end
  local v = q.value
  if type(v) == "table" and (v.route == "direct" or v.route == "decompose") then
    out.route, out.reason = v.route, type(v.reason) == "string" and v.reason or nil
  else
    out.error = "the reply gave no route (\"direct\" or \"decompose\")"
  end
  return out
end

-- cached(run) -> {path, run_id} from the newest finished fuse run on this problem whose route
-- produced a verified program, or nil
function M.cached(run)
  local rows = run.db:query("SELECT id, summary FROM runs WHERE problem_hash = :h AND policy = 'fuse' AND status = 'done'"
    .. " ORDER BY id DESC LIMIT 20", { h = run.mem.info.problem_hash }) or {}
  for _, row in ipairs(rows) do
    local s = row.summary and json.decode(row.summary)
    local final = type(s) == "table" and type(s.route) == "table" and s.route.final
    if final == "direct" or final == "decompose" then return { path = final, run_id = row.id } end
  end
end

-- decide(run, analysis, opts) -> route {path, decided_by, static, vote, cached_from, reason}.
-- opts: force ("direct"|"decompose": the user's choice) with force_reason (where it came from,
-- default "--route <path>"), vote (ask the LLM when the rules leave
-- room), cache (reuse a remembered decision). The order: the user, then what the analysis makes
-- impossible, then memory, then the rules with the vote.
function M.decide(run, a, opts)
  local s = M.static(a)
  local route = { static = { path = s.path, score = s.score, reasons = s.reasons, hard = s.hard }, features = s.features }
  if opts.force then
    route.path, route.decided_by = opts.force, "option"
    route.reason = opts.force_reason or ("--route " .. opts.force)
    return route
  end
  if s.hard then
    route.path, route.decided_by, route.reason = s.path, "analysis", s.reasons[1]
    return route
  end
  local c = opts.cache ~= false and M.cached(run)
  if c then
    route.path, route.decided_by, route.cached_from = c.path, "memory", c.run_id
    route.reason = string.format("run %s on this problem produced a verified program on the %s path", tostring(c.run_id), c.path)
    return route
  end
  local score = s.score
  route.path, route.decided_by, route.reason = s.path, "rules", table.concat(s.reasons, "; ")
  if opts.vote and run.llm then
    local v = M.vote(run, a, s)
    route.vote = v
    if v.route then
      score = score + (v.route == "decompose" and M.VOTE_WEIGHT or -M.VOTE_WEIGHT)
      route.path = score > 0 and "decompose" or score < 0 and "direct" or v.route
      route.decided_by = "rules and vote"
      route.reason = string.format("rules %+d (%s), vote %s (%s): %+d%s", s.score, s.path, v.route,
        tostring(v.reason or "no reason given"), score, score == 0 and ", a tie, which the vote decides" or "")
    end
  end
  route.score = score
  return route
end

return M
