-- Several models in one run: which model answers each role (--model, repeatable), and what each
-- model did (attempts, verified, improved, the best found, tokens, cost) for summary.json and
-- report.html.
--   --model provider:model              every role (the default model of the run)
--   --model ROLE=provider:model         one role: diagnose, plan, optimize, refine, audit, repair,
--                                       reflect, generate, route, decompose; `worker` names the
--                                       roles that write kernels (optimize, refine, audit, repair,
--                                       generate)
--   --model worker=A,B                  a mixture: worker k of a round takes the k-th (in turns)
--   --model worker=A*3,B                weights: A three turns in four
-- A role's own entry beats `worker`, which beats the default. A worker keeps its model for the
-- repairs of its kernel (the same worker number).
local M = {}

M.ROLES = { "diagnose", "plan", "optimize", "refine", "audit", "repair", "reflect", "generate", "route", "decompose",
  "review" }
M.WORKER = { optimize = true, refine = true, audit = true, repair = true, generate = true }
local KNOWN = { worker = true }
for _, r in ipairs(M.ROLES) do KNOWN[r] = true end

-- parse_one(text) -> list of models (weights expanded) | nil, why
local function parse_list(text)
  local out = {}
  for item in (text .. ","):gmatch("([^,]*),") do
    item = item:match("^%s*(.-)%s*$")
    local name, w = item:match("^(.-)%*(%d+)$")
    name, w = name or item, tonumber(w) or 1
    if name == "" then return nil, "an empty model name in '" .. text .. "'" end
    if w < 1 or w > 100 then return nil, "a weight must be 1..100 in '" .. text .. "'" end
    for _ = 1, w do out[#out + 1] = name end
  end
  return out
end

-- parse(values) -> plan {default, by_role = {role = {models}}, all = {distinct models}} | nil, why.
-- values: a string or a list of the --model values.
function M.parse(values)
  if type(values) == "string" then values = { values } end
  local plan = { by_role = {}, all = {} }
  local seen = {}
  local function note(m)
    if not seen[m] then seen[m] = true; plan.all[#plan.all + 1] = m end
  end
  for _, v in ipairs(values or {}) do
    local role, spec = v:match("^([%a_]+)=(.+)$")
    if role then
      if not KNOWN[role] then
        local names = { "worker" }
        for _, r in ipairs(M.ROLES) do names[#names + 1] = r end
        local hint = require("agents.run.args").suggest(role, names)
        return nil, string.format("--model %s: no role '%s' (roles: %s)%s", v, role, table.concat(names, ", "),
          hint and (", did you mean '" .. hint .. "'?") or "")
      end
      if plan.by_role[role] then return nil, "--model " .. role .. "= is given twice" end
      local list, why = parse_list(spec)
      if not list then return nil, "--model " .. v .. ": " .. why end
      plan.by_role[role] = list
      for _, m in ipairs(list) do note(m) end
    else
      if plan.default then return nil, "--model: two models for every role ('" .. plan.default .. "' and '" .. v
        .. "'); name a role for one of them (ROLE=provider:model)" end
      if v:find(",", 1, true) then return nil, "--model " .. v .. ": a mixture is for a role (worker=A,B)" end
      plan.default = v
      note(v)
    end
  end
  return plan
end

-- mixed(plan) -> true when some role has a model of its own (not only the default)
function M.mixed(plan)
  return plan ~= nil and next(plan.by_role) ~= nil
end

-- pick(plan, role, place, n) -> the model for this question, or nil (the run's default, as the LLM
-- layer resolved it). place:
-- the call's place ({worker}); n: how many questions this role asked before (turns when there is
-- no worker number)
function M.pick(plan, role, place, n)
  if not plan then return nil end
  local list = plan.by_role[role] or (M.WORKER[role] and plan.by_role.worker) or nil
  if not list then return nil end  -- the run's default model
  local k = tonumber(place and place.worker) or n or 1
  return list[(k - 1) % #list + 1]
end

-- stats(attempts, usage_by_model, best) -> {model = {attempts, verified, improved, best (true for
-- the model that wrote the best kernel), share_improved, calls, tokens, cost_usd (nil when some
-- call had no price)}}. attempts: the search's attempt summaries (each with .model); usage: the
-- LLM layer's by_model (kagent.llm usage()), keyed by model name without its provider.
-- known: "provider:model" names (the run's models) that usage's bare names are matched to.
function M.stats(attempts, usage, best_id, known)
  local out = {}
  local function entry(m)
    m = tostring(m)
    local e = out[m]
    if not e then
      e = { attempts = 0, verified = 0, improved = 0, best = false, calls = 0, tokens = 0, cost_usd = 0, priced = true }
      out[m] = e
    end
    return e
  end
  local improved = 0
  for _, a in ipairs(attempts or {}) do
    if a.model then
      local e = entry(a.model)
      e.attempts = e.attempts + 1
      if a.outcome == "improved" or a.outcome == "same" or a.outcome == "slower" or a.outcome == "duplicate" then
        e.verified = e.verified + 1
      end
      if a.outcome == "improved" then e.improved, improved = e.improved + 1, improved + 1 end
      if best_id and a.attempt_id == best_id then e.best = true end
    end
  end
  for name, u in pairs(usage or {}) do
    -- usage is keyed by the model's name; attempts by provider:name
    local key = name
    for _, m in ipairs(known or {}) do if m == name or m:match("^%w+:(.+)$") == name then key = m end end
    for m in pairs(out) do if m:match("^%w+:(.+)$") == name then key = m end end
    local e = entry(key)
    e.calls = u.calls or 0
    e.tokens = (u.input_tokens or 0) + (u.output_tokens or 0) + (u.cache_read_tokens or 0) + (u.cache_write_tokens or 0)
    e.cost_usd = u.cost_usd or 0
    e.priced = (u.unpriced_calls or 0) == 0
  end
  for _, e in pairs(out) do
    e.share_improved = improved > 0 and e.improved / improved or 0
  end
  return out
end

return M
