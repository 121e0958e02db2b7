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

-- load(dir) -> array of skill tables (each validated), or raises naming the bad file. Without
-- `dir`: skills/*.lua on kagent.path, where a user's skill shadows a shipped one of the same name.
function M.load(dir)
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
    out[#out + 1] = s
  end
  return out
end

-- retrieve(skills, profile, features, {limit, stats}) -> array of {skill, score} best first.
-- stats[name] = {attempts, successes} nudges the order (Laplace-smoothed success rate).
function M.retrieve(skills, profile, features, opts)
  opts = opts or {}
  local hits = {}
  for _, s in ipairs(skills) do
    local ok, score = pcall(s.applies, profile or {}, features or {})
    if ok and type(score) == "number" and score > 0 then
      local st = opts.stats and opts.stats[s.name]
      if st and (st.attempts or 0) > 0 then
        score = score * (0.5 + ((st.successes or 0) + 1) / ((st.attempts or 0) + 2))
      end
      hits[#hits + 1] = { skill = s, score = score }
    end
  end
  table.sort(hits, function(a, b)
    if a.score ~= b.score then return a.score > b.score end
    return a.skill.name < b.skill.name
  end)
  if opts.limit and #hits > opts.limit then
    for i = #hits, opts.limit + 1, -1 do hits[i] = nil end
  end
  return hits
end

-- describe(hits) -> Markdown list for prompts.
function M.describe(hits)
  if #hits == 0 then return "(no skill rule fired on this profile)" end
  local out = {}
  for _, h in ipairs(hits) do
    local s = h.skill
    out[#out + 1] = string.format("- **%s** (%s, score %.2f): %s Expect: %s. Avoid: %s.", s.name, s.category,
      h.score, s.intent, table.concat(s.expected or {}, "; "), table.concat(s.avoid or {}, "; "))
  end
  return table.concat(out, "\n")
end

return M
