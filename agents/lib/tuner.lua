-- The LLM-free tuner: coordinate search over a kernel's integer knobs (block sizes, num_warps,
-- num_stages, chunk sizes, triton.Config entries), ordered by the profile: skills whose rules
-- fire say which way a knob should move. Same run directory layout and memory records as the
-- beam search (role "tuner").
local json = require("kagent.json")
local log = require("kagent.log")
local task = require("kagent.task")
local run = require("agents.lib.run")
local select = require("agents.lib.select")
local tunables = require("agents.lib.tunables")
local features = require("agents.lib.features")
local skills_lib = require("agents.lib.skills")
local fingerprint = require("agents.lib.fingerprint")
local metrics = require("agents.lib.metrics")

local M = {}

-- hints(skill_hits) -> {knob name = "up"|"down"} from the best-scoring skill that names it
function M.hints(hits)
  local h = {}
  for _, hit in ipairs(hits) do
    for name, dir in pairs(hit.skill.tunables or {}) do
      if h[name] == nil and (dir == "up" or dir == "down") then h[name] = dir end
    end
  end
  return h
end

-- candidates(code, hints, limit, seen) -> {{code, change = {name, line, from, to, hint}}}
function M.candidates(code, hints, limit, seen)
  local ts = tunables.find(code)
  -- knobs a skill points at first, then in file order
  table.sort(ts, function(a, b)
    local ha, hb = hints[a.name] and 1 or 0, hints[b.name] and 1 or 0
    if ha ~= hb then return ha > hb end
    return a.s < b.s
  end)
  local out = {}
  for _, t in ipairs(ts) do
    for _, v in ipairs(tunables.neighbours(t, hints[t.name])) do
      local c = tunables.apply(code, t, v)
      local fp = fingerprint.of(c)
      if not seen[fp] then
        seen[fp] = true
        out[#out + 1] = { code = c, change = { name = t.name, line = t.line, from = t.value, to = v, hint = hints[t.name] or json.null } }
        if #out >= limit then return out end
      end
    end
  end
  return out
end

local function record(S, parent, cand, r, round, k, outcome)
  local dir = S.rd:worker_dir(round, k)
  local ch = cand.change
  S.rd:write(dir .. "/kernel.py", cand.code)
  S.rd:write(dir .. "/strategy.json", { { category = "tuning", summary = string.format("%s: %d -> %d (line %d)", ch.name, ch.from, ch.to, ch.line),
    reasoning = "LLM-free tuner: coordinate step on a kernel knob" .. (ch.hint ~= json.null and (", skill hint " .. ch.hint) or ""),
    root_causes = json.empty_array, recommended_fixes = { { fix = string.format("set %s=%d", ch.name, ch.to), rationale = "measured" } },
    skill = "launch_tuning" } })
  S.rd:write(dir .. "/input_ncu_metrics.json", S.rd.ncu_json(parent.result, parent.path, S.problem_path, round))
  S.rd:write(dir .. "/optimized_ncu_metrics.json", S.rd.ncu_json(r.ok and r or nil, dir .. "/kernel.py", S.problem_path, round))
  S.rd:write(dir .. "/verify_0.json", r)
  local t = r.time_ms or {}
  S.rd:write(dir .. "/benchmark_results.json", S.rd.benchmark_json(S.problem_path, S.device_name, S.dtype,
    { [string.format("kernel_round_%d_w%d", round, k)] = { time_ms = t.median or json.null, p10 = t.p10, p90 = t.p90,
      path = dir .. "/kernel.py", ok = r.ok, outcome = outcome, error = r.error, parent = parent.id,
      parent_ms = parent.result.time_ms.median } }))
  local pm, cm = parent.result.time_ms.median, t.median
  local refl = { was_diagnosis_correct = json.null, was_fix_effective = outcome == "improved",
    expected_outcome = "faster than the parent", actual_outcome = r.ok and string.format("%.4f ms vs parent %.4f ms: %s", cm, pm, outcome)
      or ("failed at " .. tostring(r.stage) .. ": " .. tostring(r.error)),
    reasoning = "Measured by the tuner (no LLM).",
    lessons = { string.format("%s %d -> %d: %s", ch.name, ch.from, ch.to, outcome) },
    avoid_patterns = outcome == "improved" and json.empty_array or { string.format("%s=%d", ch.name, ch.to) },
    try_patterns = json.empty_array }
  S.rd:write(dir .. "/reflexion.txt", json.encode(refl, { pretty = true }) .. "\n")
  local id = S.mem:add_attempt({ round = round, parent_id = parent.attempt_id, worker = k, role = "tuner", strategy = "tune",
    skill = "launch_tuning", plan_signature = string.format("%s=%d", ch.name, ch.to), source_path = dir .. "/kernel.py",
    source_hash = fingerprint.of(cand.code), fingerprint = r.fingerprint, stage = r.ok and outcome or (r.stage or "failed"),
    error_signature = r.error and tostring(r.error):match("^(%u+):"), correct = r.ok == true, time_ms = cm,
    speedup_vs_eager = S.eager_ms and cm and S.eager_ms / cm or nil, speedup_vs_compile = S.compile_ms and cm and S.compile_ms / cm or nil,
    metrics = r.ok and metrics.summarize(r) or nil })
  S.mem:add_reflexion(id, refl, nil)
  S.mem:add_lesson(refl.lessons[1], { "tuner", outcome }, id)
  S.mem:skill_outcome("launch_tuning", { bottleneck = "tuning", success = outcome == "improved",
    gain = cm and pm / cm or nil, attempt_id = id })
  S.attempts[#S.attempts + 1] = { round = round, worker = k, outcome = outcome, skill = ch.name .. "=" .. ch.to,
    time_ms = cm, stage = r.stage, error = r.error, parent = parent.id, attempt_id = id }
  return id
end

-- tune(S) -> rounds done, stop reason. S comes from run.setup + run.input.
function M.tune(S)
  local opts = S.opts
  local seen = {}
  for fp in pairs(S.known) do seen[fp] = true end
  seen[fingerprint.of(S.best.code)] = true
  local first = S.state and (S.state.round + 1) or 1
  local done, reason = first - 1, nil
  for round = first, opts.rounds do
    local parent = S.best
    local feats = features.extract(parent.code, S.problem_code, S.dtype)
    local hits = skills_lib.retrieve(S.skills, parent.profile or {}, feats, {})
    local cands = M.candidates(parent.code, M.hints(hits), opts.tune_candidates or 8, seen)
    if #cands == 0 then
      reason = #tunables.find(parent.code) == 0 and "no tunable knobs found in the kernel" or "every neighbouring setting tried"
      break
    end
    S.progress:update({ round = round, workers = #cands, busy = #cands })
    S.rd:round_dir(round)
    local fns = {}
    for i, c in ipairs(cands) do
      fns[i] = function() return S.pool:evaluate(S.job(c.code)) end
    end
    local results = task.all(fns)
    local children = {}
    for i, c in ipairs(cands) do
      local r = results[i].ok and results[i][1] or { ok = false, stage = "run", error = tostring(results[i][1]) }
      local outcome = "failed"
      if r.ok then
        local fp = r.fingerprint or fingerprint.of(c.code)
        if S.known[fp] then outcome = "duplicate"
        else
          S.known[fp] = true
          outcome = select.better(r.time_ms, parent.result.time_ms) and "improved"
            or (select.better(parent.result.time_ms, r.time_ms) and "slower" or "same")
        end
        if outcome ~= "duplicate" then
          S.seq = S.seq + 1
          children[#children + 1] = { id = string.format("r%dw%d", round, i), code = c.code, path = S.rd:path("rounds", "round_" .. round, "w" .. i, "kernel.py"),
            fingerprint = fp, result = r, time = r.time_ms, ok = true, seq = S.seq, round = round, worker = i,
            parent = parent.id, sol_pct = r.roofline and r.roofline.sol_pct, profile = metrics.summarize(r) }
        end
      end
      local id = record(S, parent, c, r, round, i, outcome)
      if children[#children] and children[#children].worker == i then children[#children].attempt_id = id end
    end
    S.progress:update({ busy = 0 })
    S.beam = select.next_beam(S.beam, children, 1)
    done = round
    if not run.update_best(S, S.beam) then
      reason = "converged: no neighbouring setting is faster beyond noise"
    end
    S.stop_reason = reason
    run.save_state(S, round)
    if reason then break end
    if S.best.sol_pct and S.best.sol_pct >= (opts.sol_stop or 95) then reason = "speed-of-light reached"; break end
  end
  return done, reason
end

-- main(opts) -> exit code; used by agents/tune.lua and by beam.lua's fallback
function M.main(opts)
  local S, err, ecode = run.setup("agents/tune.lua", opts, "tuner")
  if not S then return ecode end
  S.llm_enabled = false
  local input, ierr = run.input(S)
  if not input then io.stderr:write("tune.lua: " .. ierr .. "\n"); return 2 end
  local done, reason = M.tune(S)
  run.finish(S, done, reason)
  return 0
end

return M
