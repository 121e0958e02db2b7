-- Replies as models really write them: the tolerant reading of a reply's code (its JSON:
-- agents/run/reply_json.lua) and what the asking loop (run.ask, agents/run/chat.lua) says to a
-- model whose reply it could not use.
-- Every reader returns value, how ("used": read as it came; "repaired": it needed fixing first)
-- or nil, "EPARSE|ENOCODE: why", code. The failure modes and what is done with each are listed
-- in docs/agents.md ("Replies as models write them").
local extract = require("kagent.llm.extract")

local M = {}

-- The follow-up messages of the asking loop. They start with fixed words so a transcript (and
-- the fake server of the tests) can tell a continuation or a re-ask from a first question.
M.CONTINUE = "Your reply was cut off at the length limit. Continue it exactly where it stopped: "
  .. "do not repeat anything, do not start over, do not add a preamble."
M.REASK = "Your reply could not be used: %s\nAnswer the same task again, in English, with only what "
  .. "it asks for, in the format it asks for."
-- what stands in for a prompt section left out after a context-length error
M.LEFT_OUT = "(left out: the model's context length was exceeded)"
-- prompt variables that may be left out to fit a smaller context (history, retrieved lessons, ...)
M.SHORTENABLE = { "history", "lessons", "skills", "refusals", "metric_delta", "details" }

-- clean(text) -> the reply without reasoning blocks (<think>...</think>, as DeepSeek-R1 and Qwen
-- served by vLLM or llama.cpp put them in the content), and an unclosed one cut off
function M.clean(text)
  text = text or ""
  text = text:gsub("<think>.-</think>", ""):gsub("<thinking>.-</thinking>", "")
  -- an opening tag never closed: the model ran out of tokens while thinking, nothing after it
  text = text:gsub("<think>.*$", ""):gsub("<thinking>.*$", "")
  -- a reply that starts inside a reasoning block (the server ate the opening tag)
  local close = text:find("</think>", 1, true)
  if close then text = text:sub(close + #"</think>") end
  return text
end

-- is_context_error(err) -> true when a failed call's message says the prompt is longer than the
-- model's context (OpenAI, vLLM, llama.cpp and Anthropic word it differently)
function M.is_context_error(err)
  local s = tostring(err or ""):lower()
  return s:find("context length", 1, true) ~= nil or s:find("context window", 1, true) ~= nil
    or s:find("maximum context", 1, true) ~= nil or s:find("prompt is too long", 1, true) ~= nil
    or s:find("too many tokens", 1, true) ~= nil or s:find("exceeds the context", 1, true) ~= nil
end

-- shorten(vars) -> vars with every SHORTENABLE section replaced by LEFT_OUT, or nil when it has
-- none (nothing can be left out)
function M.shorten(vars)
  local out, cut = {}, false
  for k, v in pairs(vars or {}) do out[k] = v end
  for _, k in ipairs(M.SHORTENABLE) do
    if type(out[k]) == "string" then out[k], cut = M.LEFT_OUT, true end
  end
  return cut and out or nil
end

-- join(partial, more) -> a reply cut at the length limit and its continuation as one text. A
-- continuation that opens the fence again (models often do) or repeats the partial's last line
-- is joined without the repeat.
function M.join(partial, more)
  more = more or ""
  local _, fences = partial:gsub("```", "")
  if fences % 2 == 1 then
    local rest = more:match("^%s*```[^\n]*\n(.*)$")
    if rest then more = rest end
  end
  local last = partial:match("([^\n]+)\n?$")
  if last and #last > 8 and more:sub(1, #last) == last then more = more:sub(#last + 1) end
  return partial .. more
end

-- Code -------------------------------------------------------------------------------------------

local function defines_entry(code)
  return code:find("class%s+ModelNew%f[^%w_]") ~= nil or code:find("def%s+kernel_function%f[^%w_]") ~= nil
end

local function defines_model(code)
  return code:find("class%s+Model%s*[%(:]") ~= nil
end

-- as_model_new(code) -> the code with its `class Model` named ModelNew (what the evaluator loads)
function M.as_model_new(code)
  local out = code:gsub("class%s+Model(%s*[%(:])", "class ModelNew%1")
  out = out:gsub("super%(%s*Model%s*,", "super(ModelNew,")
  return out
end

local function is_diff(b)
  if b.lang == "diff" or b.lang == "patch" or b.lang == "udiff" then return true end
  return b.code:match("^%-%-%- ") ~= nil and b.code:find("\n%+%+%+ ") ~= nil and b.code:find("\n@@") ~= nil
end

local function lines_of(s)
  local t = {}
  for line in (s .. "\n"):gmatch("([^\n]*)\n") do t[#t + 1] = line end
  if t[#t] == "" then t[#t] = nil end
  return t
end

-- the old lines `want` stand at line `at` of src (trailing space aside; a blank line past the end
-- of src matches, as the kernel shown in a prompt may end with one blank line more)
local function matches_at(src, at, want)
  for i, w in ipairs(want) do
    local s = src[at + i - 1]
    if s == nil and at + i - 1 > #src and w:match("^%s*$") then s = "" end
    if s == nil or s:gsub("%s+$", "") ~= w:gsub("%s+$", "") then return false end
  end
  return true
end

-- apply_diff(base, diff) -> the patched source, or nil, why. Hunks are placed by their context
-- (the line numbers a model writes are often wrong): the first place at or after the previous
-- hunk where the hunk's old lines stand, nearest to the stated line.
function M.apply_diff(base, diff)
  local src = lines_of(base)
  local hunks, cur = {}, nil
  for _, line in ipairs(lines_of(diff)) do
    local start = line:match("^@@ %-(%d+)")
    if start or line:match("^@@") then
      cur = { start = tonumber(start) or 1, old = {}, new = {} }
      hunks[#hunks + 1] = cur
    elseif cur and not line:match("^%-%-%- ") and not line:match("^%+%+%+ ") then
      local c, rest = line:sub(1, 1), line:sub(2)
      if c == "-" then cur.old[#cur.old + 1] = rest
      elseif c == "+" then cur.new[#cur.new + 1] = rest
      elseif c == " " or line == "" then cur.old[#cur.old + 1] = rest; cur.new[#cur.new + 1] = rest
      elseif c ~= "\\" then return nil, "a line of hunk " .. #hunks .. " is neither context, - nor +" end
    end
  end
  if #hunks == 0 then return nil, "the diff has no hunk" end
  -- blank context lines at a hunk's ends are dropped (they may be past the kernel's end)
  for _, h in ipairs(hunks) do
    while #h.old > 0 and #h.new > 0 and h.old[#h.old]:match("^%s*$") and h.new[#h.new]:match("^%s*$") do
      h.old[#h.old], h.new[#h.new] = nil, nil
    end
    while #h.old > 0 and #h.new > 0 and h.old[1]:match("^%s*$") and h.new[1]:match("^%s*$") do
      table.remove(h.old, 1); table.remove(h.new, 1)
      h.start = h.start + 1
    end
  end
  local out, pos = {}, 1
  for n, h in ipairs(hunks) do
    local at
    if #h.old == 0 then
      at = math.max(pos, math.min(h.start, #src + 1))
    else
      local best
      for i = pos, #src + 1 do
        if matches_at(src, i, h.old) and (not best or math.abs(i - h.start) < math.abs(best - h.start)) then best = i end
      end
      at = best
    end
    if not at then return nil, "hunk " .. n .. " does not match the kernel it should change" end
    for i = pos, at - 1 do out[#out + 1] = src[i] end
    for _, l in ipairs(h.new) do out[#out + 1] = l end
    pos = at + #h.old
  end
  for i = pos, #src do out[#out + 1] = src[i] end
  return table.concat(out, "\n") .. "\n"
end

-- bare_code(text) -> the code of a reply that forgot the fences (it starts at the first import,
-- decorator or class line), or nil when the text does not define the entry point
local function bare_code(text)
  if not (defines_entry(text) or defines_model(text)) or not text:find("def%s+forward") and not text:find("def%s+kernel_function") then
    return nil
  end
  local s = text:find("\nimport ") or text:find("\nfrom ") or text:find("\n@") or text:find("\nclass ")
  if text:match("^import ") or text:match("^from ") then s = 0 end
  if not s then return nil end
  return text:sub(s + 1)
end

local function nocode(text, why)
  local shown = (text or ""):sub(1, 120):gsub("%s+", " ")
  return nil, string.format("ENOCODE: %s (the reply is %d bytes%s)", why, #(text or ""),
    shown ~= "" and (": " .. shown .. (#text > 120 and " ..." or "")) or ""), "ENOCODE"
end

-- code(text, base) -> code, how | nil, "ENOCODE: ...", "ENOCODE". base: the kernel a diff applies
-- to (the parent, or the kernel being repaired). Of several blocks the kernel is the last one that
-- defines the entry point (class ModelNew or def kernel_function), not a usage example or a test
-- after it; a `class Model` is renamed ModelNew; a unified diff is applied to base; a reply
-- without fences that is a whole file is taken as it is.
function M.code(text, base)
  local t = M.clean(text)
  if not t:match("%S") then return nocode(text, "the reply is empty") end
  local blocks = extract.blocks(t)
  local function pick(pred)
    for pass = 1, 2 do
      for i = #blocks, 1, -1 do
        local b = blocks[i]
        local tagged = b.lang == "python" or b.lang == ""
        if (pass == 1) == tagged and pred(b) then return b end
      end
    end
  end
  local b = pick(function(x) return not is_diff(x) and defines_entry(x.code) end)
  if b then return b.code, "used" end
  b = pick(function(x) return not is_diff(x) and defines_model(x.code) end)
  if b then return M.as_model_new(b.code), "repaired" end
  b = pick(is_diff)
  if b then
    if not base then return nocode(text, "the reply is a diff and there is no kernel to apply it to") end
    local patched, why = M.apply_diff(base, b.code)
    if not patched then return nocode(text, "the reply is a diff that does not apply: " .. why) end
    if not defines_entry(patched) and defines_model(patched) then patched = M.as_model_new(patched) end
    return patched, "repaired"
  end
  if #blocks == 0 then
    local bare = bare_code(t)
    if bare then return defines_entry(bare) and bare or M.as_model_new(bare), "repaired" end
    return nocode(text, "the reply has no code block")
  end
  -- a block that defines no entry point: the evaluator says what is wrong with it (the code is
  -- the model's answer, only not a complete one)
  local last = extract.code(t, "python")
  if last and last:match("%S") then return last, "used" end
  return nocode(text, "the reply's code blocks are empty")
end

return M
