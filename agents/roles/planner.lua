-- Planner role of the skill policy: one LLM call plans M attempts on a parent, each applying ONE
-- allowed skill with metric evidence (prompts/plan.md). A plan is checked, not trusted: its skill
-- must be allowed, its evidence must name a metric the parent's profile has, and a skill already
-- tried from this parent needs a stated concrete change. Then memory de-duplicates: a plan whose
-- (parent fingerprint, skill, plan signature) was tried before is refused, whatever its wording,
-- and the planner is asked once more; gaps are filled from the ranked skills by rule.
local json = require("kagent.json")
local metrics = require("agents.lib.metrics")

local M = {}

M.schema = [[{
  "plans": [
    {
      "skill": "<one allowed skill>",
      "evidence": [{"metric": "<metric name in the profile>", "value": 0, "why": "..."}],
      "plan": "what to change and why, in one or two sentences",
      "change": "the concrete change (what differs from earlier attempts with this skill)",
      "params": {"<setting>": "<value>"}
    }
  ]
}]]

local STOP = { the = true, a = true, an = true, ["and"] = true, ["or"] = true, of = true, to = true, ["in"] = true,
  on = true, with = true, by = true, ["for"] = true, each = true, per = true, is = true, be = true, it = true }

-- signature(plan) -> "skill:<params>" (sorted key=value) or "skill:<content words of the change>"
-- (lower case, sorted, stop words dropped): the key memory de-duplicates plans by
function M.signature(p)
  local parts = {}
  if type(p.params) == "table" then
    for k, v in pairs(p.params) do parts[#parts + 1] = tostring(k):lower() .. "=" .. tostring(v):lower() end
  end
  if #parts == 0 then
    local seen = {}
    for w in tostring(p.change or p.plan or ""):lower():gmatch("[%w_]+") do
      if not STOP[w] and not seen[w] then seen[w] = true; parts[#parts + 1] = w end
    end
  end
  table.sort(parts)
  while #parts > 12 do parts[#parts] = nil end
  return tostring(p.skill) .. ":" .. table.concat(parts, ",")
end

-- known_metrics(parent) -> set of names a plan may cite: Nsight names of the parent's profile, the
-- short names of agents/lib/metrics.lua, and the timing (all a CPU-mode profile has)
function M.known_metrics(parent)
  local set = { time_ms = true, median = true }
  for _, m in pairs(metrics.per_kernel(parent.result and parent.result.metrics)) do
    for name in pairs(m) do set[name] = true end
  end
  for short, v in pairs(parent.profile or {}) do
    if v ~= nil then
      set[short] = true
      for _, n in ipairs(metrics.fields[short] or {}) do set[n] = true end
    end
  end
  return set
end

-- check(plan, decision, known, tried) -> true | false, why
function M.check(p, decision, known, tried)
  if type(p) ~= "table" or type(p.skill) ~= "string" then return false, "no skill named" end
  local allowed = false
  for _, n in ipairs(decision.allowed) do if n == p.skill then allowed = true end end
  if not allowed then return false, "skill " .. p.skill .. " is not allowed here (" .. table.concat(decision.allowed, ", ") .. ")" end
  local cited = false
  for _, e in ipairs(type(p.evidence) == "table" and p.evidence or {}) do
    if type(e) == "table" and known[tostring(e.metric)] and e.value ~= nil then cited = true end
  end
  if not cited then return false, "no evidence citing a metric of the profile" end
  if tried[p.skill] and (type(p.change) ~= "string" or #p.change < 10) then
    return false, "re-trying " .. p.skill .. " needs a stated concrete change"
  end
  return true
end

-- rule_plan(name, skill, decision, parent) -> a plan built from the retrieval alone (no LLM, or
-- none usable): the bucket's evidence, or the measured time where there are no counters
function M.rule_plan(name, skill, decision, parent)
  local ev = {}
  for _, e in ipairs(decision.evidence) do
    if e.value ~= nil then ev[#ev + 1] = { metric = e.metric, value = e.value, why = "selects " .. decision.bucket } end
  end
  local t = parent.profile and parent.profile.time_ms
  if #ev == 0 and t then ev[1] = { metric = "time_ms", value = t, why = "no hardware counters: the measured time" } end
  return { skill = name, evidence = ev, plan = skill and skill.intent or name, change = "apply " .. name .. " as its intent says",
    params = {}, source = "rules" }
end

local function ask(run, parent, n, decision, hints, refused)
  local allowed = {}
  for i, r in ipairs(decision.ranked) do
    allowed[i] = string.format("%d. %s — %s", i, r.skill, r.why)
  end
  local q = run.ask_json({ tag = "plan", template = "plan", shared = run.parent_block(parent),
    want = { key = "plans", schema = M.schema }, vars = { num_plans = n, retrieval = decision.why,
      allowed = table.concat(allowed, "\n"), history = hints.history or "(none)", lessons = hints.lessons or "(none)",
      schema = M.schema,
      refused = refused and ("\n## Refused: already tried from this kernel (plan something else)\n" .. refused .. "\n") or nil } })
  local list = q.value and q.value.plans
  local warning
  if not q.res then warning = "the plan call failed (" .. tostring(q.error) .. ")"
  elseif type(list) ~= "table" then warning = "the plan reply could not be parsed (" .. tostring(q.error or "no plans") .. ")" end
  if warning then require("kagent.log").warn("plans for %s: %s; gaps are filled by rule", tostring(parent.id), warning) end
  return type(list) == "table" and list or {}, q.prompt, q.reply, warning
end

-- plans(run, parent, n, decision, hints) -> up to n accepted plans (each with .signature), and the
-- record of the decision for the trace {prompts, replies, rejected, refused, warnings}.
-- hints: {history, lessons, tried = {skill = true} (skills tried from this parent)}
function M.plans(run, parent, n, decision, hints)
  local known, tried = M.known_metrics(parent), hints.tried or {}
  local out, taken, rec = {}, {}, { prompts = {}, replies = {}, rejected = {}, refused = {}, warnings = {} }
  local function consider(p)
    local ok, why = M.check(p, decision, known, tried)
    if not ok then rec.rejected[#rec.rejected + 1] = { plan = p, why = why }; return end
    p.signature = M.signature(p)
    local before = run.mem:plan_tried(parent.fingerprint, p.skill, p.signature)
    if before or taken[p.signature] or taken[p.skill] then
      rec.refused[#rec.refused + 1] = { skill = p.skill, signature = p.signature, attempt = before and before.id or json.null,
        why = before and string.format("tried before (attempt #%d, %s)", before.id, tostring(before.stage)) or "repeats another plan of this round" }
      return
    end
    if #out < n then taken[p.signature], taken[p.skill] = true, true; out[#out + 1] = p end
  end
  if run.llm then
    for round = 1, 2 do
      local refused
      if round == 2 then
        if #rec.refused == 0 or #out >= n then break end
        local lines = {}
        for _, r in ipairs(rec.refused) do lines[#lines + 1] = "- " .. r.signature .. ": " .. r.why end
        refused = table.concat(lines, "\n")
      end
      local list, prompt, reply, warning = ask(run, parent, n - #out, decision, hints, refused)
      rec.prompts[round], rec.replies[round] = prompt, reply
      if warning then rec.warnings[#rec.warnings + 1] = warning end
      for _, p in ipairs(list) do consider(p) end
    end
  end
  local by_name = {}
  for _, s in ipairs(run.skills) do by_name[s.name] = s end
  for _, r in ipairs(decision.ranked) do
    if #out >= n then break end
    -- a rule plan has no concrete change of its own: only for skills not tried on this kernel
    if not taken[r.skill] and not tried[r.skill] then consider(M.rule_plan(r.skill, by_name[r.skill], decision, parent)) end
  end
  local from_rules = 0
  for _, p in ipairs(out) do if p.source == "rules" then from_rules = from_rules + 1 end end
  if run.reply_stats then run.reply_stats:directions("plan", #out - from_rules, from_rules) end
  if #rec.rejected == 0 then rec.rejected = json.empty_array end
  if #rec.refused == 0 then rec.refused = json.empty_array end
  if #rec.warnings == 0 then rec.warnings = json.empty_array end
  return out, rec
end

return M
