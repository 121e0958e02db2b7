-- Judge (diagnosis) role: ONE LLM call returns M ranked, distinct bottlenecks, each with root
-- causes grounded in metrics and a recommended fix. If the reply is unusable or repeats itself,
-- the missing directions come from the skills' rules, so direction 2 never repeats direction 1.
local json = require("kagent.json")
local metrics = require("agents.lib.metrics")
local skills_lib = require("agents.lib.skills")

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

-- prompt_vars(ctx, parent, m, hits, history, lessons) -> vars for prompts/diagnose.md
function M.prompt_vars(ctx, parent, m, hits, history, lessons)
  local r = parent.result or {}
  local t = r.time_ms or {}
  return {
    num_bottlenecks = m,
    gpu = ctx.gpu_text or "unknown",
    dtype = ctx.dtype,
    problem_code = ctx.problem_code,
    kernel_label = parent.label or parent.id,
    kernel_code = parent.code,
    timing = ctx.timing_text(r),
    roofline = metrics.roofline_text(r),
    metrics = metrics.grouped_text(r),
    skills = skills_lib.describe(hits),
    history = history,
    lessons = lessons,
    schema = M.schema,
  }
end

-- diagnose(ctx, parent, m, hits, history, lessons) -> bottlenecks, prompt, reply_text
function M.diagnose(ctx, parent, m, hits, history, lessons)
  local prompt = ctx.render("diagnose", M.prompt_vars(ctx, parent, m, hits, history, lessons))
  local list, reply = {}, nil
  if ctx.llm_enabled then
    local res, err = ctx.chat(prompt, "diagnose")
    if res then
      reply = res.text
      local obj = ctx.extract_json(res.text)
      if type(obj) == "table" then
        list = M.normalize(obj.bottlenecks or (obj[1] and obj) or {})
      end
    else
      reply = "LLM call failed: " .. tostring(err)
    end
  end
  list = M.fill(list, m, hits, parent.profile or {})
  for i = 1, #list do list[i].rank = i end
  return list, prompt, reply or "(no LLM reply: directions from skill rules)"
end

M.encode = function(v) return json.encode(v, { pretty = true }) end

return M
