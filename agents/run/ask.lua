-- The asking loop: one question to the model, asked until its answer can be used or is lost.
-- What is done with each way a real model's reply goes wrong (docs/agents.md, "Replies as
-- models write them"):
--   * read tolerantly (agents/run/replies.lua): JSON in prose or in any fence, sloppy JSON,
--     renamed or nested keys, several code blocks, class Model, a diff, <think> blocks;
--   * a reply cut at the length limit (finish_reason "length") is continued once, the model's
--     partial reply sent back, and the two parts joined;
--   * a prompt over the model's context (HTTP 400 "maximum context length") is asked again once
--     with its history and retrieved lessons left out (replies.SHORTENABLE);
--   * a reply that still cannot be used (a refusal, an empty reply, prose in another language,
--     junk) is asked once more with the reason quoted;
--   * then it is lost: a failed reply (ENOCODE, EPARSE), never a kernel failure.
-- Every question is counted per role (agents/run/reply_stats.lua); a call that fails (the LLM
-- down) is the LLM guard's, not a reply.
local log = require("kagent.log")
local replies = require("agents.run.replies")
local reply_json = require("agents.run.reply_json")
local prompts = require("agents.run.prompts")
local options = require("agents.run.options")

local M = {}

-- the replies of a question as the run folder keeps them (the first MiB; agents/run/prompts.lua)
local trace = prompts.transcript_trace

-- the part of an unusable reply sent back with the re-ask (enough to see what was wrong)
local ECHO = 4000

local function clip(text)
  text = text or ""
  if #text <= ECHO then return text end
  return text:sub(1, ECHO) .. "\n[... " .. (#text - ECHO) .. " more characters]"
end

-- limits(run) -> {reply, code}: the bytes a reply's text and the kernel taken from it may have
-- (--max-reply-bytes, --max-code-bytes; options.lua's defaults for a run whose options lack them)
function M.limits(run)
  local o = run.opts or {}
  return { reply = o.max_reply_bytes or options["max-reply-bytes"].default,
    code = o.max_code_bytes or options["max-code-bytes"].default }
end

-- A reply over a size limit (ETOOBIG: the LLM layer stopped reading it, or its text or kernel is
-- over the run's limit) is a failed reply: the files keep this note instead of it, and the re-ask
-- does not send it back.
local function size_note(why) return "[kagent-rt: " .. tostring(why) .. "; the reply is not kept]\n" end
local NOT_REPEATED = "(a reply over the size limit: not repeated here)"

-- ask(run, q) -> {value, how, prompt, reply, res, error, llm_code}
-- q: tag (the role), template and vars (its prompt), shared (the block sent first), parse(text)
-- -> value, how | nil, err, code. value nil: error and llm_code say why (the call failed, or the
-- reply was lost: ENOCODE or EPARSE from parse, ETOOBIG for a reply over the size limits).
function M.ask(run, q)
  local stats = run.reply_stats
  local limits = M.limits(run)
  local vars, repaired = q.vars, false
  local prompt = run.render(q.template, vars)
  local res, err, code = run.chat(prompt, q.tag, q.shared)
  if not res and replies.is_context_error(err) then
    local short = replies.shorten(vars)
    if short then
      log.warn("%s: the prompt is over the model's context (%s); asking again without history and lessons", q.tag, err)
      stats:add(q.tag, "shortened")
      prompt, repaired = run.render(q.template, short), true
      res, err, code = run.chat(prompt, q.tag, q.shared)
    end
  end
  local out = { prompt = run.full_prompt(prompt, q.shared) }
  if not res and code ~= "ETOOBIG" then
    out.reply, out.error, out.llm_code = "LLM call failed: " .. tostring(err), err, code
    return out
  end
  -- what the reply files show: every reply of the question, with a line saying why the next
  -- one was asked, together cut to a MiB (run.transcript_trace)
  local transcript, head = {}, nil
  -- complete(res) -> the reply's text, continued once when it was cut at the length limit
  local function complete(r)
    local text = r.text or ""
    transcript[#transcript + 1] = { head = head, text = text }
    head = nil
    if not r.truncated or #text > limits.reply then return text end
    stats:add(q.tag, "continued")
    local more, merr = run.chat(prompt, q.tag, q.shared,
      { { role = "assistant", content = text ~= "" and text or "(empty)" }, { role = "user", content = replies.CONTINUE } })
    if not more then
      log.warn("%s: the continuation of a reply cut at the length limit failed (%s); reading what came", q.tag, tostring(merr))
      return text
    end
    transcript[#transcript + 1] = { head = "\n[kagent-rt: the reply was cut at the length limit; its continuation:]\n",
      text = more.text or "" }
    repaired = true
    return replies.join(text, more.text or "")
  end
  -- read(r, rerr, rcode) -> value, how | nil, why, why_code, text: one reply read, or a call the
  -- LLM layer refused for its size (r nil, rcode ETOOBIG)
  local function read(r, rerr, rcode)
    local first = #transcript + 1
    if not r then
      local why = tostring(rerr) .. " (the run's --max-reply-bytes)"
      transcript[first] = { head = head, text = size_note(why) }
      head = nil
      return nil, why, rcode
    end
    local text = complete(r)
    local value, how, pcode
    if #text > limits.reply then
      how, pcode = string.format("ETOOBIG: the reply is %d bytes, over --max-reply-bytes (%d)", #text, limits.reply), "ETOOBIG"
    else
      value, how, pcode = q.parse(text)
    end
    if value == nil and pcode == "ETOOBIG" then
      local h = transcript[first].head
      for i = #transcript, first, -1 do transcript[i] = nil end
      transcript[first] = { head = h, text = size_note(how) }
      text = nil
    end
    return value, how, pcode, text
  end
  local value, how, pcode, text = read(res, err, code)
  if value == nil then
    local perr = how  -- the reason quoted to the model
    log.warn("%s: the reply cannot be used (%s); asking once more with the reason", q.tag, tostring(perr))
    local echo = not text and NOT_REPEATED or (text:match("%S") and clip(text) or "(empty)")
    local again, aerr, acode = run.chat(prompt, q.tag, q.shared,
      { { role = "assistant", content = echo }, { role = "user", content = string.format(replies.REASK, tostring(perr)) } })
    if again or acode == "ETOOBIG" then
      head = "\n[kagent-rt: the reply could not be used (" .. tostring(perr) .. "); the answer to the re-ask:]\n"
      res = again or res
      value, how, pcode = read(again, aerr, acode)
      if value == nil then perr = how end
      if value ~= nil then how = "reasked" end
    else
      perr, pcode = aerr, acode
    end
    if value == nil then
      stats:add(q.tag, "lost")
      log.warn("%s: no usable reply after asking again: %s", q.tag, tostring(perr))
    else
      stats:add(q.tag, "reasked")
    end
    how = value ~= nil and how or perr
  else
    if repaired then how = "repaired" end
    stats:add(q.tag, how)
  end
  if run.progress then run.progress:update({ replies = stats:status() }) end
  out.value, out.how, out.res = value, value ~= nil and how or nil, res
  -- the model that answered ("provider:model"), recorded with what it wrote
  out.model = res and res.model and ((res.provider and (res.provider .. ":") or "") .. res.model) or nil
  out.reply = trace(transcript)
  if value == nil then out.error, out.llm_code = how, pcode end
  return out
end

-- code(run, q) -> ask for a kernel: q as ask's, with base (the kernel a diff applies to) instead of
-- parse. -> {code, prompt, reply, how, error, llm_code}
function M.code(run, q)
  local max = M.limits(run).code
  q.parse = function(text)
    local code, how, ecode = replies.code(text, q.base)
    if code and #code > max then
      -- never evaluated, kept or resent in later prompts as a parent or a kernel to repair
      return nil, string.format("ETOOBIG: the reply's kernel is %d bytes, over --max-code-bytes (%d)", #code, max), "ETOOBIG"
    end
    return code, how, ecode
  end
  local a = M.ask(run, q)
  a.code = a.value
  return a
end

-- json(run, q) -> ask for a JSON answer: q as ask's, with want ({key|fields, schema}, as
-- reply_json.json's) instead of parse
function M.json(run, q)
  q.parse = function(text) return reply_json.json(text, q.want) end
  return M.ask(run, q)
end

return M
