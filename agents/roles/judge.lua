-- Judge (diagnosis) role: ONE LLM call returns M ranked, distinct bottlenecks, each with root
-- causes grounded in metrics and a recommended fix. If the reply is unusable or repeats itself,
-- the missing directions come from the skills' rules, so direction 2 never repeats direction 1.
local skills_lib = require("agents.lib.skills")
local features = require("agents.lib.features")

local M = {}

M.schema = [[{
  "bottlenecks": [
    {
      "category": "memory | compute | underutilized | latency | launch",
      "summary": "one sentence naming the limiter",
      "reasoning": "why this limits the kernel, referring to metric values",
      "root_causes": [
        {"cause": "...", "evidence": [{"metric": "<metric name>", "value": 0, "interpretation": "..."}]}
      ],
      "recommended_fixes": [{"fix": "a concrete code change", "rationale": "..."}],
      "skill": "<skill name or none>",
      "expected_gain_pct": 0
    }
  ]
}]]

local function key_of(b)
  return ((b.skill and b.skill ~= "none") and b.skill or "") .. "|" .. (b.category or "") .. "|" .. (b.summary or ""):lower():gsub("%W", ""):sub(1, 60)
end

-- normalize(list) -> valid bottlenecks (fields filled), duplicates removed
function M.normalize(list)
  local out, seen, seen_skill = {}, {}, {}
  for _, b in ipairs(type(list) == "table" and list or {}) do
    if type(b) == "table" and type(b.summary) == "string" and b.summary ~= "" then
      b.category = type(b.category) == "string" and b.category or "underutilized"
      b.reasoning = type(b.reasoning) == "string" and b.reasoning or ""
      b.root_causes = type(b.root_causes) == "table" and b.root_causes or {}
      b.recommended_fixes = type(b.recommended_fixes) == "table" and b.recommended_fixes or {}
      local k = key_of(b)
      local sk = b.skill and b.skill ~= "none" and b.skill
      -- two directions naming the same skill are the same direction
      if not seen[k] and not (sk and seen_skill[sk]) then
        seen[k] = true
        if sk then seen_skill[sk] = true end
        out[#out + 1] = b
      end
    end
  end
  return out
end

-- from_skill(hit, profile) -> a bottleneck built from a skill rule (no LLM)
function M.from_skill(hit, profile)
  local s = hit.skill
  local ev = {}
  for _, f in ipairs({ "dram_pct", "sm_pct", "occupancy", "stall_long", "coalescing", "regs" }) do
    if profile[f] then ev[#ev + 1] = { metric = f, value = profile[f], interpretation = "profile summary" } end
  end
  if #ev == 0 and profile.time_ms then ev[1] = { metric = "time_ms", value = profile.time_ms, interpretation = "measured median" } end
  return {
    category = s.category == "memory" and "memory" or (s.category == "compute" and "compute" or "underutilized"),
    summary = "Rule " .. s.name .. " fires: " .. s.intent:match("^[^:]+"),
    reasoning = string.format("Selected by the skill rule %s (score %.2f).", s.name, hit.score),
    root_causes = { { cause = s.intent, evidence = ev } },
    recommended_fixes = { { fix = s.intent, rationale = "expected: " .. table.concat(s.expected or {}, "; ") } },
    skill = s.name,
    source = "rules",
  }
end

-- fill(list, m, hits, profile) -> list topped up to m distinct directions from the skill hits
function M.fill(list, m, hits, profile)
  local have = {}
  for _, b in ipairs(list) do if b.skill then have[b.skill] = true end end
  for _, h in ipairs(hits) do
    if #list >= m then break end
    if not have[h.skill.name] then
      have[h.skill.name] = true
      list[#list + 1] = M.from_skill(h, profile)
    end
  end
  while #list > m do list[#list] = nil end
  return list
end

-- diagnose(run, parent, m, hints) -> bottlenecks, prompt, reply_text, warning. hints: {hits (skill
-- rule hits), history, lessons}. The parent's block goes first (shared with its workers' prompts).
-- warning: why the diagnosis gave no usable direction (the call failed, or its reply could not
-- be parsed), logged; the directions then come from the skill rules.
function M.diagnose(run, parent, m, hints)
  hints = hints or {}
  local hits = hints.hits or {}
  local vars = { num_bottlenecks = m, skills = skills_lib.describe(hits),
    history = hints.history or "(none)", lessons = hints.lessons or "(none)", schema = M.schema }
  local prompt = run.render("diagnose", vars)
  local list, reply, warning = {}, nil, nil
  local shared = run.parent_block(parent)
  if run.llm then
    local a = run.ask_json({ tag = "diagnose", template = "diagnose", vars = vars, shared = shared,
      want = { key = "bottlenecks", schema = M.schema } })
    prompt, reply = a.prompt, a.reply
    if a.value then
      list = M.normalize(a.value.bottlenecks)
      if #list == 0 then warning = "the diagnosis reply has no usable bottleneck" end
    elseif a.res then
      warning = "the diagnosis reply could not be parsed (" .. tostring(a.error) .. ")"
    else
      warning = "the diagnosis call failed (" .. tostring(a.error) .. ")"
    end
    -- (not where the LLM is down: the run stops, and says why once)
    if warning and not (run.llm_guard and run.llm_guard.down) then
      require("kagent.log").warn("diagnosis of %s: %s; its directions come from the skill rules", tostring(parent.id), warning)
    end
  else
    prompt = run.full_prompt(prompt, shared)
  end
  local from_model = #list
  list = M.fill(list, m, hits, parent.profile or {})
  for i = 1, #list do list[i].rank = i end
  if run.reply_stats then run.reply_stats:directions("diagnose", math.min(from_model, #list), #list - math.min(from_model, #list)) end
  return list, prompt, reply or "(no LLM reply: directions from skill rules)", warning
end

-- directions(run, parent, m) -> m directions for a parent's workers, and (when the diagnosis gave
-- nothing usable) {diagnosis_warning, directions_from} for the trace: the skills whose rules fire
-- (ranked by their learned record), what was tried from this parent and lessons of similar
-- problems go into one diagnosis call; each direction carries that call's prompt and reply as
-- its trace (bottleneck_prompt.txt, bottleneck_response.txt), and the history and lessons its
-- worker's prompt shows.
function M.directions(run, parent, m)
  local feats = features.extract(parent.code, run.problem_code, run.dtype, run.op_class)
  local hits = skills_lib.retrieve(run.skills, parent.profile, feats,
    { limit = 6, stats = run.mem:skill_stats({ op_class = run.op_class }) })
  local words = { run.op_class }
  for _, h in ipairs(hits) do words[#words + 1] = h.skill.name end
  local hints = { hits = hits, history = run.mem:history_text(parent.fingerprint),
    lessons = run.mem:lessons_text({ op_class = run.op_class, query = table.concat(words, " ") }) }
  local list, prompt, reply, warning = M.diagnose(run, parent, m, hints)
  for _, b in ipairs(list) do
    b.trace = { ["bottleneck_prompt.txt"] = prompt, ["bottleneck_response.txt"] = reply }
    b.history, b.lessons = hints.history, hints.lessons
  end
  return list, warning and { diagnosis_warning = warning, directions_from = "skill rules" } or nil
end

return M
