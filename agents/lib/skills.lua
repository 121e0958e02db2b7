-- Loads skills/*.lua and retrieves the ones whose rules fire on a profile, ranked by rule score
-- and by what has worked before (long-term statistics, when memory provides them).
local M = {}

local function list_lua(dir)
  local ok, fs = pcall(require, "kagent.fs")
  local names = {}
  if ok and fs and fs.list then
    for _, n in ipairs(fs.list(dir) or {}) do if n:match("%.lua$") then names[#names + 1] = n end end
  else
    local p = io.popen('ls "' .. dir .. '" 2>/dev/null')
    for n in p:lines() do if n:match("%.lua$") then names[#names + 1] = n end end
    p:close()
  end
  table.sort(names)
  return names
end

-- load(dir, language) -> array of skill tables (each validated), or raises naming the bad file.
-- Without `dir`: skills/*.lua on kagent.path, where a user's skill shadows a shipped one of the
-- same name. language (--language, default triton): a skill's `intents[language]`, where it has
-- one, is its intent (the same change in that language's words: `__syncthreads` and shared arrays
-- rather than tl.dot); a skill whose `languages` list leaves the language out is not loaded.
function M.load(dir, language)
  language = language or "triton"
  local out, paths = {}, {}
  if dir then
    for _, n in ipairs(list_lua(dir)) do paths[#paths + 1] = dir .. "/" .. n end
  else
    paths = kagent.files("skills", ".lua")
  end
  for _, path in ipairs(paths) do
    local chunk, err = loadfile(path)
    if not chunk then error("skills: " .. err) end
    local s = chunk()
    if type(s) ~= "table" or type(s.name) ~= "string" or type(s.applies) ~= "function"
      or type(s.intent) ~= "string" or type(s.category) ~= "string" then
      error("skills: " .. path .. " must return {name, category, intent, applies, expected, avoid}")
    end
    s.path = path
    if type(s.intents) == "table" and type(s.intents[language]) == "string" then s.intent = s.intents[language] end
    local wanted = type(s.languages) ~= "table"
    for _, l in ipairs(type(s.languages) == "table" and s.languages or {}) do wanted = wanted or l == language end
    if wanted then out[#out + 1] = s end
  end
  return out
end

-- The learned ranking, one formula for every policy. A skill's record in long-term memory
-- (attempts n, successes k, median gain g over the parent, for this bottleneck class, op class and
-- GPU) gives its expected success (k + 1) / (n + 2); an exploration bonus 0.2 / sqrt(n + 1) keeps
-- untried skills in play without outranking one that has worked; the rule score (0..1) only breaks
-- ties between skills with the same record. So 0 successes in 10 tries sinks a skill, and one
-- success lifts it above untried skills with the same rule score.
M.EXPLORE = 0.2
M.PRIOR_WEIGHT = 0.2

-- score(prior, record) -> number, and a short text saying why
function M.score(prior, rec)
  local n, k = rec and rec.attempts or 0, rec and rec.successes or 0
  local mean = (k + 1) / (n + 2)
  local explore = M.EXPLORE / math.sqrt(n + 1)
  local gain = 0
  if k > 0 and rec.median_gain and rec.median_gain > 1 then gain = math.min(0.1, 0.1 * math.log(rec.median_gain) / math.log(2)) end
  local s = mean + explore + gain + M.PRIOR_WEIGHT * (prior or 0)
  local why = n == 0 and string.format("untried (explore +%.2f), rule %.2f", explore, prior or 0)
    or string.format("%d/%d succeeded%s, rule %.2f", k, n,
      rec.median_gain and string.format(", median gain %.2fx", rec.median_gain) or "", prior or 0)
  return s, why
end

-- rank(items, stats) -> items sorted best first, each given .score and .why. items: {{skill,
-- prior}}; stats[name] = {attempts, successes, median_gain}.
function M.rank(items, stats)
  for _, it in ipairs(items) do
    it.record = stats and stats[it.skill.name] or nil
    it.score, it.why = M.score(it.prior, it.record)
  end
  table.sort(items, function(a, b)
    if a.score ~= b.score then return a.score > b.score end
    return a.skill.name < b.skill.name
  end)
  return items
end

-- retrieve(skills, profile, features, {limit, stats}) -> array of {skill, prior, score, why}
-- best first: the skills whose rules fire, ranked by their learned record (rank above).
function M.retrieve(skills, profile, features, opts)
  opts = opts or {}
  local hits = {}
  for _, s in ipairs(skills) do
    local ok, score = pcall(s.applies, profile or {}, features or {})
    if ok and type(score) == "number" and score > 0 then
      hits[#hits + 1] = { skill = s, prior = score }
    end
  end
  M.rank(hits, opts.stats)
  if opts.limit and #hits > opts.limit then
    for i = #hits, opts.limit + 1, -1 do hits[i] = nil end
  end
  return hits
end

-- catalogue(skills) -> every skill as Markdown (the system prompt's list)
function M.catalogue(skills)
  local lines = {}
  for i, s in ipairs(skills) do
    lines[i] = string.format("- **%s** (%s): %s Expect: %s. Avoid: %s.", s.name, s.category, s.intent,
      table.concat(s.expected or {}, "; "), table.concat(s.avoid or {}, "; "))
  end
  return table.concat(lines, "\n")
end

-- describe(hits) -> Markdown list for prompts.
function M.describe(hits)
  if #hits == 0 then return "(no skill rule fired on this profile)" end
  local out = {}
  for _, h in ipairs(hits) do
    local s = h.skill
    out[#out + 1] = string.format("- **%s** (%s, rank score %.2f: %s)", s.name, s.category, h.score, h.why or "")
  end
  return table.concat(out, "\n")
end

return M
