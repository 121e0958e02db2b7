-- The run's LLM: which model answers each role (--model, agents/run/models.lua), kagent.llm set up
-- from the options, and the run's chat and asking loop (agents/run/ask.lua), retried and counted
-- by its guard (agents/run/llm_guard.lua) and shown on the status line.
local fs = require("kagent.fs")
local json = require("kagent.json")
local log = require("kagent.log")
local ktime = require("kagent.time")
local calls = require("agents.run.calls")
local llm_guard = require("agents.run.llm_guard")
local reply_stats = require("agents.run.reply_stats")
local models = require("agents.run.models")
local ask = require("agents.run.ask")
local prompts = require("agents.run.prompts")

local M = {}

-- model_plan(opts) -> which model answers each role (agents/run/models.lua) | nil, why
function M.model_plan(opts)
  return models.parse(type(opts.model) == "table" and opts.model or (opts.model and { opts.model } or {}))
end

-- model_flags(opts) -> "--model a --model b: " as the user gave them ("" without --model), for
-- messages about them
function M.model_flags(opts)
  local list = type(opts.model) == "table" and opts.model or (opts.model and { opts.model } or {})
  if #list == 0 then return "" end
  return "--model " .. table.concat(list, " --model ") .. ": "
end

-- prices(path) -> the --prices table | nil, why
local function read_prices(path)
  local text = fs.read(path)
  if not text then return nil, "cannot read " .. path end
  local t = json.decode(text)
  if type(t) ~= "table" then return nil, path .. " is not a JSON object" end
  for m, p in pairs(t) do
    if type(p) ~= "table" then return nil, path .. ": the price of " .. tostring(m) .. " is not an object" end
    for k, v in pairs(p) do
      if type(v) ~= "number" or v < 0 then return nil, string.format("%s: %s.%s is not a number >= 0", path, m, k) end
    end
  end
  return t
end

-- configure_llm(opts) -> kagent.llm set up from the options (--model, --prices, --llm-timeout,
-- --stream, --max-reply-bytes: the LLM layer stops reading a longer reply), then
-- llm.configured()'s answer: true, "provider:model" | false, why, code (ENOTSUP for a --model set
-- or --prices file that cannot be used)
function M.configure_llm(opts)
  local llm = require("kagent.llm")
  local plan, why = M.model_plan(opts)
  if not plan then return llm, false, why, "ENOTSUP" end
  local conf = { model = plan.default, timeout = opts.llm_timeout, stream = opts.stream or nil,
    max_reply = opts.max_reply_bytes }
  if opts.prices then
    local p, perr = read_prices(opts.prices)
    if not p then return llm, false, "--prices: " .. perr, "ENOTSUP" end
    conf.prices = p
  end
  if next(conf) then llm.configure(conf) end
  return llm, llm.configured()
end

-- require_llm(prog, opts, needs, hint) -> kagent.llm configured from the options, or nil and the
-- exit status after saying why on stderr: 3 when the LLM does not answer (nothing was started; try
-- later), 2 when none is configured (`needs`: what needs one; `hint`: an extra line, optional)
function M.require_llm(prog, opts, needs, hint)
  local llm, configured, which, code = M.configure_llm(opts)
  if configured then return llm end
  if llm_guard.TRANSIENT[code] then
    io.stderr:write(prog .. ": the LLM does not answer: " .. tostring(which) .. ". Nothing was started.\n")
    return nil, 3
  end
  if which == llm.NOT_CONFIGURED then
    io.stderr:write(prog .. ": " .. needs .. " needs an LLM, and " .. which .. "\n" .. (hint and (hint .. "\n") or ""))
  else
    io.stderr:write(prog .. ": " .. M.model_flags(opts) .. tostring(which)
      .. ". Nothing was started.\n")
  end
  return nil, 2
end

-- check_llm(prog, opts, llm) -> true, or nil and the exit status after saying why once on stderr:
-- before any worker starts, one request asks the server whether it takes the key and serves the
-- run's models (llm.check; docs/agents.md, "The LLM is checked first"). 2 where it refuses the key
-- or does not serve a model (its URL's /v1 missing, say), 3 where it does not answer.
-- KAGENT_LLM_CHECK=0 skips it (a server with no model list); a strict replay sends nothing.
function M.check_llm(prog, opts, llm)
  local flag = os.getenv("KAGENT_LLM_CHECK")
  if flag == "0" or flag == "false" or flag == "no" or flag == "off" then return true end
  local plan = M.model_plan(opts)
  local ok, err, code = llm.check(plan and plan.all or {})
  if ok then return true end
  local why = tostring(err):gsub("^%u+: ", "")
  if llm_guard.TRANSIENT[code] then
    io.stderr:write(prog .. ": the LLM does not answer: " .. why .. ". Nothing was started.\n")
    return nil, 3
  end
  io.stderr:write(prog .. ": " .. M.model_flags(opts) .. why .. ". Nothing was started."
    .. (code == "EAUTH" and " Fix the key and run again.\n" or "\n"))
  return nil, 2
end

-- add(r): r.chat, r.ask, r.ask_code, r.ask_json, r.extract_code, r.code_from, r.extract_json on a
-- run (after prompts.add: a call sends r.system_prompt())
function M.add(r)
  local opts = r.opts
  -- The decoding rate the status line shows: the mean over the streams in flight, else the
  -- run's mean (kagent.llm usage), once a reply came streamed.
  local guard = r.llm_guard or llm_guard.new({ limit = opts.llm_failures, backoff = opts.llm_backoff })
  r.llm_guard = guard
  r.reply_stats = r.reply_stats or reply_stats.new()
  local streams, shown_at = {}, 0
  local function rate()
    local sum, n = 0, 0
    for slot in pairs(streams) do
      local tps = slot.p and slot.p.tokens_per_s
      if tps then sum, n = sum + tps, n + 1 end
    end
    if n > 0 then return sum / n end
    return r.llm and r.llm.usage().tokens_per_s
  end
  local function show(force)
    if not r.progress then return end
    local now = ktime.now()
    if not force and now - shown_at < 0.5 then return end
    shown_at = now
    r.progress:update({ tokens_per_s = guard.streamed and rate() or nil, llm_failures = guard.failures,
      replies = r.reply_stats:status() })
  end

  -- chat(text, tag, shared) -> result or nil, "CODE: message", "CODE". `shared` (a block from
  -- above) goes first; for Anthropic it is its own message marked for the prompt cache, for
  -- OpenAI-compatible servers (which cache prefixes by themselves) it is joined with the text
  -- into one message. Failures are retried and counted by the run's guard (agents/run/llm_guard.lua).
  -- follow: messages after the prompt (the asking loop's continuation or re-ask: the model's
  -- reply, then what is asked of it), optional
  local asked_by_role = {}
  function r.chat(text, tag, shared, follow)
    if not r.llm then return nil, "ENOTSUP: no LLM configured", "ENOTSUP" end
    -- the model of this role (--model ROLE=...), a worker's turn of a mixture, else the run's
    local n = (asked_by_role[tag or "?"] or 0) + 1
    asked_by_role[tag or "?"] = n
    local model = models.pick(r.model_plan, tag, calls.place(), n) or r.model
    local messages
    if shared and tostring(model):match("^anthropic:") then
      messages = { { role = "user", content = shared, cache = true }, { role = "user", content = text } }
    else
      messages = { { role = "user", content = prompts.full_prompt(text, shared) } }
    end
    local asked = prompts.full_prompt(text, shared)
    for _, m in ipairs(follow or {}) do
      messages[#messages + 1] = m
      asked = asked .. "\n\n" .. m.role .. ": " .. m.content
    end
    -- the call's place and replay key are taken once: the guard's retries are the same call
    local system_text = r.system_prompt()
    local place, key
    if r.calls then place, key = r.calls:key(tag, system_text, asked) end
    local slot = {}
    streams[slot] = true
    local res, err, code = guard:call(function()
      return r.llm.chat({ model = model, system = system_text, messages = messages,
        max_tokens = opts.max_tokens, temperature = opts.temperature, tag = tag, replay_key = key,
        on_token = function(_, p) slot.p = p; show(false) end })
    end, tag)
    streams[slot] = nil
    if r.calls then r.calls:record(place, key, res, err, code, model) end
    if res then
      if res.text == nil then res.text = "" end
      if res.streamed then guard.streamed = true end
    elseif not guard.down then
      -- (a call the guard did not make, or whose failure brought the LLM down, is said once: by
      -- the guard now, and why when the run stops)
      log.warn("LLM %s call failed: %s", tag or "?", tostring(err))
    end
    show(true)
    return res, err, code
  end

  -- ask{tag, template, vars, shared, parse} -> {value, how, prompt, reply, res, error, llm_code}:
  -- one question to the model, asked until its answer can be used or is lost
  -- (agents/run/ask.lua); counted per role in r.reply_stats
  -- ask_code{tag, template, vars, shared, base} -> the same with .code (base: the kernel a diff
  -- applies to); ask_json{tag, template, vars, shared, want} (want: the shape, reply_json.json's)
  function r.ask(q) return ask.ask(r, q) end
  function r.ask_code(q) return ask.code(r, q) end
  function r.ask_json(q) return ask.json(r, q) end

  function r.extract_code(text)
    if not text or not r.llm then return nil end
    return r.llm.extract_code(text, "python")
  end

  -- code_from(text) -> code | nil, "ENOCODE: ...", "ENOCODE" (prompts.code_from)
  function r.code_from(text) return prompts.code_from(r.extract_code, text) end

  function r.extract_json(text)
    if not text or not r.llm then return nil end
    return r.llm.extract_json(text)
  end

end

return M
