-- kagent.http: HTTP requests that park only the calling task (libcurl multi on the event loop),
-- whole (request) or streamed as the bytes arrive (stream).
local native = require("kagent.native")
local task = require("kagent.task")

local M = {}

local METHODS = { GET = true, POST = true, PUT = true, DELETE = true, PATCH = true, HEAD = true }

-- Checks a request table (misuse raises, blamed on the caller's caller) -> the native request.
local function checked(fname, req)
  if type(req) ~= "table" then error(fname .. ": expected a table", 3) end
  if type(req.url) ~= "string" or not req.url:match("^https?://") then
    error(fname .. ": url must be an http:// or https:// string", 3)
  end
  local method = req.method or "GET"
  if not METHODS[method] then error(fname .. ": unsupported method " .. tostring(method), 3) end
  if req.body ~= nil and type(req.body) ~= "string" then error(fname .. ": body must be a string", 3) end
  if req.headers ~= nil and type(req.headers) ~= "table" then
    error(fname .. ": headers must be a table", 3)
  end
  for _, k in ipairs({ "timeout", "connect_timeout", "idle_timeout", "start_timeout", "max_body" }) do
    if req[k] ~= nil and type(req[k]) ~= "number" then error(fname .. ": " .. k .. " must be a number", 3) end
  end
  task._running_task(fname)
  return {
    method = method, url = req.url, headers = req.headers, body = req.body, timeout = req.timeout,
    connect_timeout = req.connect_timeout, idle_timeout = req.idle_timeout, start_timeout = req.start_timeout,
    max_body = req.max_body,
  }
end

--- request{method, url, headers, body, timeout, connect_timeout, idle_timeout, start_timeout, max_body} ⏸
--- -> {status, headers, body, elapsed} | nil, "CODE: message", "CODE".
--- A 4xx/5xx reply is a result; failures are ETIMEDOUT, ECONNECT, ETOOBIG, EHTTP.
function M.request(req)
  local op = native.http.request_start(checked("http.request", req))
  return task._await(op, "http.request")
end

-- Streams ------------------------------------------------------------------------------------------
local Stream = {}
Stream.__index = Stream

-- The next queued event of the stream, parking until there is one.
local function next_event(s, fname)
  local next_of = native.http.stream_next
  while true do
    local kind, a, b = next_of(s)
    if kind then return kind, a, b end
    task._await(native.http.stream_wait_start(s), fname)
  end
end

--- stream{...same fields as request...} ⏸ -> stream | nil, "CODE: message", "CODE".
--- Returns once the status and headers are in: stream.status, stream.headers.
function M.stream(req)
  local s = native.http.stream_open(checked("http.stream", req))
  local kind, a, b = next_event(s, "http.stream")
  if kind == "head" then return setmetatable({ _s = s, status = a, headers = b }, Stream) end
  if kind == "error" then return nil, a .. ": " .. b, a end
  -- Ended with no reply at all (curl reports that as an error, so this is a safeguard).
  return nil, "EHTTP: the connection ended before a reply (" .. req.url:gsub("[?#].*", "") .. ")", "EHTTP"
end

--- stream:read() ⏸ -> the next bytes of the body (as they arrived), nil at the end, or
--- nil, "CODE: message", "CODE" when the transfer failed (ETIMEDOUT for a stall, EHTTP, ...).
function Stream:read()
  if self._done then return nil, self._err, self._code end
  local kind, a, b = next_event(self._s, "stream:read")
  if kind == "data" then return a end
  self._done = true
  if kind == "error" then
    self._err, self._code = a .. ": " .. b, a
    return nil, self._err, self._code
  end
  return nil
end

--- stream:body() ⏸ -> the rest of the body as one string, or nil, "CODE: message", "CODE".
function Stream:body()
  local parts = {}
  while true do
    local chunk, err, code = self:read()
    if not chunk then
      if err then return nil, err, code end
      return table.concat(parts)
    end
    parts[#parts + 1] = chunk
  end
end

--- stream:close(): aborts the transfer if it is still running (idempotent).
function Stream:close()
  self._done = true
  native.http.stream_close(self._s)
end

--- stats() -> {started, in_flight, completed, failed, canceled}: transfers since the run began.
function M.stats()
  return native.http.stats()
end

--- sha256(s) -> lower-case hex digest (internal helper, used for record/replay keys).
M._sha256 = native.http.sha256

return M
