-- The prompts of a run: templates rendered (prompts/, kagent.prompt), the shared blocks every
-- call about a kernel sends first, byte-identical so a prompt cache can hold them, and how the
-- run folder keeps what was asked and replied.
local prompt = require("kagent.prompt")
local metrics = require("agents.lib.metrics")
local skills_lib = require("agents.lib.skills")
local language = require("agents.run.language")

local M = {}

-- add(r): r.render, r.language_rules (agents/run/language.lua), r.system_prompt, r.problem_block, r.parent_block and the text helpers on a run
function M.add(r)
  function r.render(name, vars)
    local text, err = prompt.render(name, vars)
    if not text then error(err) end
    return text
  end
  -- --language and --library as the prompts state them (agents/run/language.lua)
  language.add(r)

  -- The system prompt is the same for every call of the run, and so is the skill catalogue in
  -- it: together they pass the providers' minimum cacheable length on their own.
  local system
  function r.system_prompt()
    system = system or r.render("system", { language = r.language_name, language_rules = r.language_rules(),
      gpu_name = r.device_name, skills = skills_lib.catalogue(r.skills) })
    return system
  end

  -- problem_block() / parent_block(kernel): the shared context of prompts, rendered once so every
  -- call about a kernel sends byte-identical text first (what a prompt cache needs).
  local blocks = {}
  function r.problem_block()
    blocks.problem = blocks.problem or r.render("problem", { gpu = r.gpu_text or "unknown", dtype = r.dtype,
      problem_code = r.problem_code })
    return blocks.problem
  end
  function r.parent_block(k)
    local key = "kernel:" .. tostring(k.id) .. ":" .. tostring(k.fingerprint)
    if not blocks[key] then
      local res = k.result or {}
      blocks[key] = r.problem_block() .. "\n" .. r.render("parent", { kernel_label = k.label or k.id,
        kernel_code = k.code, timing = M.timing_text(res), roofline = metrics.roofline_text(res),
        metrics = metrics.grouped_text(res) })
    end
    return blocks[key]
  end

  r.full_prompt = M.full_prompt
  r.reply_trace = M.reply_trace
  r.entry_point = M.entry_point
  r.timing_text = M.timing_text
end

-- A reply's copy in the run folder keeps at most this much: the head, then how much was cut
-- (a 10 MB reply of junk is not worth 10 MB in every trace file that shows it).
M.MAX_REPLY_TRACE = 1048576

-- reply_trace(text[, max]) -> what a reply file in the run folder holds (max: the bytes it may
-- keep, default MAX_REPLY_TRACE)
function M.reply_trace(text, max)
  text, max = text or "", max or M.MAX_REPLY_TRACE
  if #text <= max then return text end
  return text:sub(1, max) .. string.format("\n[kagent-rt: the reply was %d bytes; the %d after the "
    .. "first %d are not kept here]\n", #text, #text - max, max)
end

-- transcript_trace(parts) -> a reply file for the replies of one question (its first reply, a
-- continuation, the answer to a re-ask): parts {head, text}, together at most MAX_REPLY_TRACE
-- bytes of what the model sent, each cut reply saying how much was not kept
function M.transcript_trace(parts)
  local out, left = {}, M.MAX_REPLY_TRACE
  for _, p in ipairs(parts) do
    out[#out + 1] = (p.head or "") .. M.reply_trace(p.text, left)
    left = math.max(0, left - #(p.text or ""))
  end
  return table.concat(out)
end

-- code_from(extract, text) -> code | nil, "ENOCODE: ...", "ENOCODE". A reply with no usable code
-- (a refusal, junk, nothing) is a failed reply, not a failed kernel: the caller hands the code
-- on as an LLM failure (agents/search/attempt.lua), so memory learns nothing from it.
function M.code_from(extract, text)
  local code = text and text ~= "" and extract(text) or nil
  if code and code:match("%S") then return code end
  local shown = text and text:sub(1, 120):gsub("%s+", " ") or ""
  return nil, string.format("ENOCODE: the LLM's reply (%d bytes) has no code block%s", text and #text or 0,
    shown ~= "" and (": " .. shown .. (#text > 120 and " ..." or "")) or ""), "ENOCODE"
end

-- full_prompt(text, shared) -> the text a call sends after the system prompt (what traces keep)
function M.full_prompt(text, shared)
  return shared and (shared .. "\n\n" .. text) or text
end

function M.entry_point(code)
  code = code or ""
  if code:find("def%s+kernel_function") and not code:find("class%s+ModelNew") then return "`def kernel_function(...)`" end
  return "`class ModelNew(nn.Module)`"
end

local function fmt_ms(v) return v and string.format("%.4f ms", v) or "-" end

function M.timing_text(r)
  r = r or {}
  local t = r.time_ms
  local parts = {}
  if type(t) == "table" and t.median then
    parts[#parts + 1] = string.format("median %.4f ms (p10 %s, p90 %s, n=%s)", t.median, fmt_ms(t.p10), fmt_ms(t.p90), tostring(t.n or "?"))
  end
  if r.eager_ms then parts[#parts + 1] = "eager " .. fmt_ms(r.eager_ms) end
  if r.compile_ms then parts[#parts + 1] = "torch.compile " .. fmt_ms(r.compile_ms) end
  return #parts > 0 and table.concat(parts, "; ") or "not timed"
end

return M
