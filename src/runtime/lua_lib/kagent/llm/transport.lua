-- Moving one LLM request over HTTP: one attempt (a whole reply, or a streamed one decoded from
-- server-sent events as it arrives), what a failed attempt means (a failure record), and the
-- retry driver with its backoff, capped Retry-After and per-call deadline. Policy that needs the
-- run's state (slots, accounting, record/replay) stays in llm.lua and its other parts.
local http = require("kagent.http")
local json = require("kagent.json")
local task = require("kagent.task")
local log = require("kagent.log")
local clock = require("kagent.time")
local errors = require("kagent.llm.errors")
local sse = require("kagent.llm.sse")

local M = {}

local RETRY_STATUS = { [408] = true, [409] = true, [429] = true, [500] = true, [502] = true,
                       [503] = true, [504] = true, [529] = true }
-- (ETOOBIG, a reply over max_body, is not: the same request would bring the same reply)
local RETRY_CODE = { ETIMEDOUT = true, ECONNECT = true, EHTTP = true }

--- A failed attempt: {code, message (without the code), status, server_error, retryable,
--- retry_after}. llm.lua adds attempts and turns it into nil, "CODE: message", "CODE", info.
function M.failure(code, message, fields)
  local f = fields or {}
  f.code, f.message = code, message
  return f
end

--- shown(url) -> the URL as messages and logs name it: without credentials (user:password@)
--- and without its query or fragment, where a key may ride (kagent.http's messages do the same)
function M.shown(url)
  return (tostring(url):gsub("^(%a[%w+.-]*://)[^/?#@]*@", "%1"):gsub("[?#].*$", ""))
end

--- loopback(base) -> whether a base URL names this machine (localhost, 127.x.x.x, [::1])
function M.loopback(base)
  local host = M.shown(base):match("^%a[%w+.-]*://%[?([^/%]]+)")
  if not host then return false end
  host = host:gsub(":%d+$", "")
  return host == "localhost" or host == "::1" or host:match("^127%.%d+%.%d+%.%d+$") ~= nil
end

-- A transport failure from kagent.http ("CODE: message"), with the key scrubbed out. A refused
-- connection to this machine means nothing listens there: a second later nothing will either,
-- so it is not retried and says what to do (`refused`).
local function transport_failure(r, err, code)
  local message = errors.scrub(err, r.key):gsub("^%u+: ", "")
  if code == "ECONNECT" and M.loopback(r.base)
      and (message:find("Couldn't connect to server", 1, true) or message:find("Connection refused", 1, true)) then
    return M.failure(code, "nothing listens at " .. M.shown(r.base) .. " (connection refused): start the server, or set "
      .. "KAGENT_LLM_URL to where it runs", { retryable = false, refused = true })
  end
  return M.failure(code, message, { retryable = RETRY_CODE[code] == true })
end

local function retry_after(headers)
  local ms = tonumber(headers["retry-after-ms"] or "")
  if ms then return ms / 1000 end
  return tonumber(headers["retry-after"] or "")
end

--- status_failure(r, status, headers, server_said) -> the failure for an HTTP error status (or
--- an error event that stands for one), naming what to check, with the server's own words.
function M.status_failure(r, status, headers, server_said)
  local said = server_said and errors.scrub(server_said, r.key) or nil
  local tail = said and (": " .. said) or ""
  local code, message
  if status == 401 or status == 403 then
    code = "EAUTH"
    if r.key then
      message = r.provider .. " refused the API key in " .. r.key_env .. " (HTTP " .. status .. ")" .. tail
        .. "; check the key and its permissions"
    else
      message = "the server at " .. M.shown(r.base) .. " wants an API key (HTTP " .. status .. ")" .. tail .. "; set " .. r.key_env
    end
  elseif status == 400 then
    code, message = "EBADREQ", r.provider .. " rejected the request (HTTP 400)" .. tail
  elseif status == 404 then
    code = "ENOTFOUND"
    message = r.provider .. " has no model '" .. tostring(r.model) .. "' at " .. M.shown(r.base) .. " (HTTP 404)" .. tail
      .. "; check KAGENT_MODEL or the base URL"
  elseif status == 429 or status == 529 then
    code = "ERATELIMIT"
    message = r.provider .. " is rate-limited or overloaded (HTTP " .. status .. ")" .. tail
  else
    code, message = "EHTTP", r.provider .. " answered HTTP " .. status .. tail
  end
  return M.failure(code, message, { status = status, server_error = said, retryable = RETRY_STATUS[status] == true,
                                    retry_after = headers and retry_after(headers) or nil })
end

--- too_big(text_bytes, max_reply, rest) -> the failure of a reply whose text is over max_reply
--- (ETOOBIG, not retried: the same request would bring it again); rest says what was not read.
function M.too_big(n, max_reply, rest)
  return M.failure("ETOOBIG", string.format("the reply's text is %s bytes, over max_reply (%d bytes)%s", n, max_reply,
    rest or ""), { status = 200, retryable = false })
end

--- reply(r, res, max_reply) -> parsed | nil, failure: a whole reply ({status, headers, body}).
function M.reply(r, res, max_reply)
  if res.status ~= 200 then
    return nil, M.status_failure(r, res.status, res.headers, errors.server_text(res.body))
  end
  local decoded = json.decode(res.body)
  local parsed, why
  if decoded == nil then
    why = "reply is not JSON (content-type " .. tostring(res.headers["content-type"]) .. ", " .. #res.body .. " bytes)"
  else
    parsed, why = r.prov.parse(decoded)
  end
  if parsed then
    if max_reply and #(parsed.text or "") > max_reply then return nil, M.too_big(#parsed.text, max_reply) end
    return parsed
  end
  return nil, M.failure("EPARSE", r.provider .. " " .. why, { status = 200 })
end

local function request_fields(r, lim, method, url, body)
  return { method = method, url = url, headers = r.prov.headers(r.key), body = body, timeout = lim.remaining,
           connect_timeout = math.min(lim.connect, lim.remaining), idle_timeout = lim.idle,
           start_timeout = lim.start and math.min(lim.start, lim.remaining) or nil, max_body = lim.max_body }
end

--- get(r, lim, url) -> decoded JSON | nil, failure (GET with the call's key and limits).
function M.get(r, lim, url)
  local res, err, code = http.request(request_fields(r, lim, "GET", url))
  if not res then return nil, transport_failure(r, err, code) end
  if res.status ~= 200 then
    return nil, M.status_failure(r, res.status, res.headers, errors.server_text(res.body))
  end
  local d = json.decode(res.body)
  if d == nil then return nil, M.failure("EPARSE", url .. " did not answer JSON", { status = 200 }) end
  return d
end

--- post_whole(r, wire, lim) -> parsed | nil, failure.
function M.post_whole(r, wire, lim)
  local res, err, code = http.request(request_fields(r, lim, "POST", r.url, wire))
  if not res and code == "ETOOBIG" and lim.max_reply then
    -- the body limit was max_reply's (config.lua): say so in its terms
    return nil, M.too_big("more than " .. lim.max_reply, lim.max_reply,
      string.format(": its body passed %d bytes and the rest was not read", lim.max_body))
  end
  if not res then return nil, transport_failure(r, err, code) end
  return M.reply(r, res, lim.max_reply)
end

--- post_stream(r, wire, lim, on_delta) -> parsed | nil, failure. on_delta(text, p) runs in the
--- calling task for each delta (text "" for a reasoning delta). lim.stream holds the open stream
--- so that the caller can close it if the task is killed mid-way.
function M.post_stream(r, wire, lim, on_delta)
  local s, err, code = http.stream(request_fields(r, lim, "POST", r.url, wire))
  if not s then
    local f = transport_failure(r, err, code)
    if code == "ETIMEDOUT" then
      -- no reply started (no connection, or no headers): the server is not answering, and the
      -- same request a second later would wait as long again; the caller (the agents' guard)
      -- decides when to ask again, so a dead provider is found in one timeout per call
      f.retryable = false
      f.no_reply = true
    end
    return nil, f
  end
  lim.stream = s
  local ctype = s.headers["content-type"] or ""
  if s.status ~= 200 or not ctype:find("text/event-stream", 1, true) then
    -- An error, or a server that ignored "stream": one whole body.
    local body, berr, bcode = s:body()
    if not body then return nil, transport_failure(r, berr, bcode) end
    local parsed, f = M.reply(r, { status = s.status, headers = s.headers, body = body }, lim.max_reply)
    if parsed then on_delta(parsed.text, nil) end
    return parsed, f
  end
  local p = r.prov.stream_parser()
  local got, over = 0, false  -- bytes of text so far; past max_reply nothing more is read
  local dec = sse.decoder(function(name, data)
    if p.done or p.error or p.bad or over then return end
    local text = p.event(name, data)
    if text then
      got = got + #text
      if lim.max_reply and got > lim.max_reply then over = true; return end
      on_delta(text, p)
    end
  end)
  while true do
    local chunk, rerr, rcode = s:read()
    if not chunk then
      if rerr then
        local f = transport_failure(r, rerr, rcode)
        if p.deltas > 0 then f.message = f.message .. " (after " .. p.deltas .. " streamed deltas)" end
        return nil, f
      end
      break
    end
    dec.feed(chunk)
    if p.error or p.bad then break end
    if over then
      s:close()
      return nil, M.too_big("more than " .. lim.max_reply, lim.max_reply, " (streamed): the rest was not read")
    end
  end
  s:close()
  if not (p.error or p.bad) then dec.finish() end
  if p.error then
    -- Coded and retried as the status the event stands for; the reply itself was a 200.
    local f = M.status_failure(r, p.error_status or 500, nil, p.error)
    f.status = 200
    f.message = r.provider .. " sent an error event mid-stream, after " .. p.deltas .. " deltas: " .. f.server_error
    return nil, f
  end
  if p.bad then return nil, M.failure("EPARSE", r.provider .. " " .. p.bad, { status = 200 }) end
  local parsed, why = p.result()
  if not parsed then return nil, M.failure("EPARSE", r.provider .. " " .. why, { status = 200 }) end
  return parsed
end

-- A delay before retry k: between half and all of min(max, base·2^(k-1)), random so that
-- clients that failed together do not retry together (the runtime seeds math.random).
local function backoff(b, k)
  local d = math.min(b.max, b.base * 2 ^ (k - 1))
  return d / 2 + math.random() * d / 2
end

--- run(ctx, attempt) -> value, attempts | nil, failure (with attempts and elapsed set).
--- attempt(k, remaining) -> value | nil, failure. ctx: {what (for the log), retries, backoff =
--- {base, max}, deadline, timeout, on_retry()}. A retryable failure is retried after the backoff,
--- or the server's Retry-After capped at backoff.max, while retries and the deadline allow; each
--- retry, and giving up on a retryable failure, is logged as a warning when it happens.
function M.run(ctx, attempt)
  local t0 = clock.now()
  local k = 0
  while true do
    k = k + 1
    local remaining = ctx.deadline - clock.now()
    local value, f
    if remaining > 0 then
      value, f = attempt(k, remaining)
      if value ~= nil then return value, k end
    else
      f = M.failure("ETIMEDOUT", "the call's " .. ctx.timeout .. " s timeout passed", {})
    end
    f.attempts, f.elapsed = k, clock.now() - t0
    local delay, note, why_not = nil, "", nil
    if f.retryable then
      if k > ctx.retries then
        why_not = "retries spent"
      else
        delay = backoff(ctx.backoff, k)
        if f.retry_after then
          delay = math.min(f.retry_after, ctx.backoff.max)
          if f.retry_after > ctx.backoff.max then
            note = string.format(" (the server asked for %g s; capped at backoff.max)", f.retry_after)
          end
        end
        if clock.now() + delay >= ctx.deadline then
          delay, why_not = nil, "no time left within the call's " .. ctx.timeout .. " s timeout"
        end
      end
    end
    if not delay then
      if why_not then
        if k > 1 then f.message = string.format("%s; gave up after %d attempts in %.1f s (%s)", f.message, k, f.elapsed, why_not)
        else f.message = f.message .. " (" .. why_not .. ")" end
        log.warn("llm: %s: %s: %s", ctx.what, f.code, f.message)
      end
      return nil, f
    end
    ctx.on_retry()
    log.warn("llm: %s: %s: %s; retry %d/%d in %.2f s%s", ctx.what, f.code, f.message, k, ctx.retries, delay, note)
    task.sleep(delay)
  end
end

return M
