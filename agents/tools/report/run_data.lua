-- What a run's report shows, read from its run directory alone (summary.json, state.json,
-- rounds/round_<r>/round.json, input_eval.json, best_eval.json, usage.csv, the kernels), so a
-- report can be rebuilt for any run folder, on any machine, without its database.
local fs = require("kagent.fs")
local json = require("kagent.json")
local calls = require("agents.run.calls")
local metrics = require("agents.lib.metrics")
local baselines = require("agents.lib.baselines")

local M = {}

local function read_json(dir, rel)
  local s = fs.read(fs.join(dir, rel))
  local v = s and json.decode(s)
  return type(v) == "table" and v or nil
end
M.read_json = read_json

local function num(v) return type(v) == "number" and v or nil end

local function median(t) return type(t) == "table" and num(t.median) or nil end

-- outcome(a) -> the colour class of an attempt: improved | same | slower | duplicate | failed
-- (an attempt without a time failed, whatever else it says)
local function outcome(a)
  if a.outcome == "failed" or not num(a.time_ms) then return "failed" end
  return a.outcome or "failed"
end
M.outcome = outcome

-- id(a) -> the kernel id an attempt has (or would have had) in the beam
local function attempt_id(a) return string.format("r%sw%s", tostring(a.round), tostring(a.worker)) end

-- started(run_id) -> "YYYY-MM-DD HH:MM UTC" from a run id's time stamp, or nil
function M.started(run_id)
  local y, mo, d, h, mi = tostring(run_id):match("_(%d%d%d%d)(%d%d)(%d%d)%-(%d%d)(%d%d)%d%d_%x+$")
  return y and string.format("%s-%s-%s %s:%s UTC", y, mo, d, h, mi) or nil
end

-- best_per_round(dir, summary, state) -> {{round, time_ms, id}}: the input at round 0, then the
-- best kernel at the end of each round (search-time medians, as the search saw them)
function M.best_per_round(dir, s, st)
  local out = {}
  local input_ms = st and st.input and median(st.input.result and st.input.result.time_ms)
  if input_ms then out[1] = { round = 0, time_ms = input_ms, id = "input" } end
  local times = {}
  for _, a in ipairs(st and st.attempts or {}) do if num(a.time_ms) then times[attempt_id(a)] = a.time_ms end end
  times.input = input_ms
  for r = 1, num(s.rounds) or 0 do
    local rj = read_json(dir, string.format("rounds/round_%d/round.json", r))
    if rj and rj.best then
      local t
      for _, k in ipairs(rj.beam or {}) do if k.id == rj.best then t = num(k.time_ms) end end
      t = t or times[rj.best]
      if t then out[#out + 1] = { round = r, time_ms = t, id = rj.best } end
    end
  end
  return out
end

-- the legend's words for the baselines it knows (charts.lua colours them); another shows by its name
local LEGEND = { compile = "torch.compile", compile_max_autotune = "compile max-autotune" }

-- reference_lines(summary, roof) -> {{name, time_ms}}: the baselines the summary saved (eager,
-- torch.compile, max-autotune), the speed-of-light bound and the confirmed best, the ones that
-- were measured
local function reference_lines(s, roof)
  local b, out = s.baselines or {}, {}
  -- label: the legend's entry, with its value
  local function add(name, v)
    if num(v) then out[#out + 1] = { name = name, time_ms = v, label = string.format("%s %.4f ms", name, v) } end
  end
  for _, name in ipairs(baselines.saved(b)) do add(LEGEND[name] or name, b[name .. "_ms"]) end
  add("speed of light", roof and roof.lower_bound_ms)
  -- the best kernel as the final re-measure timed it (search-time medians can differ from it)
  if s.verified == true then add("best, re-measured", s.best_ms) end
  return out
end

-- attempt rows: the per-round table and the points of the attempts chart
local function attempt_rows(st, input_ms)
  local rows, timed, failed = {}, {}, {}
  local per_round = {}
  for _, a in ipairs(st and st.attempts or {}) do per_round[a.round or 0] = math.max(per_round[a.round or 0] or 0, a.worker or 0) end
  for _, a in ipairs(st and st.attempts or {}) do
    local o = outcome(a)
    local n = per_round[a.round or 0] or 1
    -- workers of a round side by side around the round's tick
    local x = (a.round or 0) + (n > 1 and ((a.worker or 1) - (n + 1) / 2) * math.min(0.5 / n, 0.12) or 0)
    local row = { id = attempt_id(a), round = a.round, worker = a.worker, parent = a.parent, skill = a.skill or "-",
      bottleneck = a.bottleneck or "-", outcome = o, stage = a.stage, error = a.error, time_ms = num(a.time_ms),
      p10 = num(a.p10), p90 = num(a.p90), parent_ms = num(a.parent_ms), duplicate_of = a.duplicate_of, tries = a.tries,
      promotion = a.promotion, x = x }
    if row.time_ms and row.parent_ms then row.vs_parent = row.parent_ms / row.time_ms end
    if row.time_ms and input_ms then row.vs_input = input_ms / row.time_ms end
    if row.p10 and row.p90 then row.spread = string.format("%.4f-%.4f", row.p10, row.p90) end
    rows[#rows + 1] = row
    if o == "failed" then
      failed[#failed + 1] = { id = row.id, x = x, round = a.round, worker = a.worker, stage = tostring(a.stage or "?"),
        error = tostring(a.error or ""):sub(1, 200) }
    elseif row.time_ms then
      timed[#timed + 1] = { id = row.id, x = x, round = a.round, worker = a.worker, outcome = o, time_ms = row.time_ms,
        spread = row.spread or "-", parent = a.parent or "-", skill = a.skill or "-" }
    end
  end
  table.sort(rows, function(p, q)
    if p.round ~= q.round then return (p.round or 0) < (q.round or 0) end
    return (p.worker or 0) < (q.worker or 0)
  end)
  return rows, timed, failed
end

-- lineage(rows, best_id, input_ms) -> tree nodes: the input, then every attempt under its parent
local function lineage(rows, best_id, input_ms)
  local nodes = { { id = "input", outcome = "input", best = best_id == "input",
    label = "input" .. (input_ms and string.format(" %.4f ms", input_ms) or ""), tip = "input kernel" } }
  local known = { input = true }
  for _, r in ipairs(rows) do known[r.id] = true end
  for _, r in ipairs(rows) do
    local label = r.id .. (r.time_ms and string.format(" %.4f ms", r.time_ms) or (" " .. tostring(r.stage)))
    nodes[#nodes + 1] = { id = r.id, parent = known[r.parent] and r.parent or "input", outcome = r.outcome,
      best = r.id == best_id, label = label,
      tip = string.format("%s: %s%s (skill %s)", r.id, r.outcome, r.outcome == "failed" and (" at " .. tostring(r.stage)) or "",
        tostring(r.skill)) }
  end
  return nodes
end

-- roof_of(result) -> the roofline of an evaluator result with the GPU limits it came from
-- (peak bytes/s and FLOP/s, from its memory- and compute-bound times), or nil
local function roof_of(res)
  local r = type(res) == "table" and res.roofline
  if type(r) ~= "table" or not num(r.bytes) then return nil end
  local o = { bytes = r.bytes, flops = num(r.flops), lower_bound_ms = num(r.lower_bound_ms), sol_pct = num(r.sol_pct),
    binding = r.binding }
  if num(r.memory_bound_ms) and r.memory_bound_ms > 0 then o.peak_bytes_per_s = r.bytes / (r.memory_bound_ms * 1e-3) end
  if o.flops and num(r.compute_bound_ms) and r.compute_bound_ms > 0 then o.peak_flops_per_s = o.flops / (r.compute_bound_ms * 1e-3) end
  return o
end

-- Key metrics of a kernel for the side-by-side table (profile names of agents/lib/metrics.lua).
M.KEY_METRICS = {
  { "dram_pct", "DRAM bandwidth (% of peak)" }, { "mem_sol_pct", "memory SOL (%)" }, { "sm_pct", "compute SOL (%)" },
  { "occupancy", "achieved occupancy (%)" }, { "l1_hit", "L1 hit rate (%)" }, { "l2_hit", "L2 hit rate (%)" },
  { "coalescing", "bytes used per sector (%)" }, { "tensor_pct", "tensor pipe (%)" }, { "regs", "registers per thread" },
  { "dram_read", "DRAM bytes read" }, { "dram_write", "DRAM bytes written" }, { "stall_long", "long-scoreboard stalls (%)" },
  { "kernel_count", "kernels launched" },
}

-- side_by_side(input_eval, best_eval, summary) -> the "Input vs best" rows. Every time and speedup
-- in them is of one method and one moment: the final confirmation's (the best as confirmed, the
-- input re-timed beside it, both over the confirmation's baselines), as the header's speedups
-- are; the input's start-time figures (input_eval.json, the search's) are not mixed in. A run
-- without a confirmed best shows no times here (M.SIDE_METHOD says which figures the table holds).
M.SIDE_METHOD = "the final confirmation's figures: the best as confirmed and the input re-timed beside it, "
  .. "over the confirmation's baselines (the header's speedups)"
local function side_by_side(input, best, s)
  local rows = {}
  local function add(name, a, b, fmt) if a ~= nil or b ~= nil then rows[#rows + 1] = { metric = name, input = a, best = b, fmt = fmt } end end
  if s.verified == true then
    local ti = type(s.input_time) == "table" and s.input_time or { median = num(s.input_ms) }
    local tb = type(s.best_time) == "table" and s.best_time or { median = num(s.best_ms) }
    add("time, median (ms)", num(ti.median), num(tb.median), "%.4f")
    add("time, p10 (ms)", num(ti.p10), num(tb.p10), "%.4f")
    add("time, p90 (ms)", num(ti.p90), num(tb.p90), "%.4f")
    local b = s.baselines or {}
    for _, sp in ipairs({ { "eager_ms", "speedup vs eager" }, { "compile_ms", "speedup vs torch.compile" } }) do
      local v = num(b[sp[1]])
      add(sp[2], v and num(ti.median) and v / ti.median, v and num(tb.median) and v / tb.median, "%.3f")
    end
  end
  local ri, rb = roof_of(input), roof_of(best)
  add("speed of light (%)", ri and ri.sol_pct, rb and rb.sol_pct, "%.1f")
  local pi, pb = metrics.summarize(input or {}), metrics.summarize(best or {})
  for _, m in ipairs(M.KEY_METRICS) do add(m[2], num(pi[m[1]]), num(pb[m[1]]), "%.4g") end
  return rows
end

-- running_summary(dir, st) -> what a run still in progress can show in place of summary.json:
-- its options and the rounds done (state.json, saved after every round); status "running". The
-- header's model, device, mode and wall come from state.json's `live` (agents/search/state.lua),
-- and the best so far from its `best`, a search-time figure (search_best: the page says so).
local function running_summary(dir, st)
  local o, live = st.opts or {}, type(st.live) == "table" and st.live or {}
  local best = type(st.best) == "table" and st.best or nil
  local best_ms = best and type(best.result) == "table" and median(best.result.time_ms)
  return { run_id = fs.basename(dir), status = st.stopped and "stopped" or "running", problem = o.problem, policy = o.policy, dtype = o.dtype,
    device = live.device or "-", mode = live.mode or (o.tuner and "tuner") or "-", model = live.model,
    wall_s = num(live.wall_s), rounds = num(st.round) or 0, rounds_requested = o.rounds,
    stop_reason = st.stopped or "(running)", attempts = #(st.attempts or {}), baselines = st.baselines,
    search_best = best_ms and { id = best.id, round = best.round, time_ms = best_ms } or nil,
    tokens = { total = st.usage and st.usage.tokens }, llm_calls = st.usage and st.usage.calls,
    cost_usd = st.usage and st.usage.cost_usd }
end

-- kernel_file(id) -> the run-folder path of a kernel id's source: input, or r<round>w<worker>
local function kernel_file(id)
  if id == "input" then return "input_kernel.py" end
  local r, w = tostring(id):match("^r(%d+)w(%d+)$")
  return r and string.format("rounds/round_%s/w%s/kernel.py", r, w) or nil
end

-- Files an attempt's row links to, where they exist: its kernel, its prompt and the reply.
M.ATTEMPT_FILES = { { "kernel", "kernel.py" }, { "prompt", "opt_prompt.txt" }, { "reply", "opt_reply.txt" } }

-- attempt_links(dir, rows) -> each row's links ({name, href}) and the sources a diff against its
-- parent needs: codes = {id -> source} of every attempt and parent that has one
local function attempt_links(dir, rows)
  local codes = {}
  local function code_of(id)
    if codes[id] == nil then
      local f = kernel_file(id)
      codes[id] = f and fs.read(fs.join(dir, f)) or false
    end
    return codes[id]
  end
  for _, r in ipairs(rows) do
    local wdir = string.format("rounds/round_%s/w%s", tostring(r.round), tostring(r.worker))
    r.links = {}
    for _, f in ipairs(M.ATTEMPT_FILES) do
      if fs.exists(fs.join(dir, wdir .. "/" .. f[2])) then r.links[#r.links + 1] = { f[1], wdir .. "/" .. f[2] } end
    end
    r.has_diff = code_of(r.id) and code_of(r.parent or "input") and true or false
  end
  local out = {}
  for id, c in pairs(codes) do if c then out[id] = c end end
  return out
end

-- load(dir) -> the report's data for the run folder dir, or nil, why. A run still in progress
-- (state.json, no summary.json yet) gives what it has so far, with d.running set.
function M.load(dir)
  local s = read_json(dir, "summary.json")
  local st = read_json(dir, "state.json")
  local running = false
  if not s then
    if not (st and st.opts) then
      for _, f in ipairs({ "summary.json", "state.json" }) do
        if fs.exists(fs.join(dir, f)) then return nil, string.format("%s/%s is not a run's %s (damaged or not JSON)", dir, f, f) end
      end
      return nil, dir .. " has no summary.json nor state.json (not a run folder)"
    end
    s, running = running_summary(dir, st), not st.stopped
  end
  local input_eval, best_eval = read_json(dir, "input_eval.json"), read_json(dir, "best_eval.json")
  local input_ms = st and st.input and median(st.input.result and st.input.result.time_ms)
    or median(input_eval and input_eval.time_ms) or num(s.input_ms)
  local rows, timed, failed = attempt_rows(st, input_ms)
  local usage = calls.read_csv(fs.join(dir, "usage.csv"))
  local roof = roof_of(best_eval) or roof_of(input_eval)
  local d = { dir = dir, summary = s, state = st, input_eval = input_eval, best_eval = best_eval, rows = rows,
    timed = timed, failed = failed, input_ms = input_ms, roof = roof, usage = usage, by_role = calls.by_role(usage),
    replay = s.replay, started = M.started(s.run_id),
    input_code = fs.read(fs.join(dir, "input_kernel.py")), best_code = fs.read(fs.join(dir, "best_kernel.py")) }
  d.best_series = M.best_per_round(dir, s, st)
  d.lines = reference_lines(s, roof)
  d.lineage = lineage(rows, s.best and s.best.id, input_ms)
  d.side = side_by_side(input_eval, best_eval, s)
  d.rounds = num(s.rounds) or 0
  d.running = running
  d.stopped = st and st.stopped or nil  -- a run stopped on an LLM failure (--resume continues it)
  d.options = st and st.opts or nil
  d.codes = attempt_links(dir, rows)
  return d
end

return M
