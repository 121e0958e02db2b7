-- kagent.http: HTTP requests that park only the calling task (libcurl multi on the event loop).
local native = require("kagent.native")
local task = require("kagent.task")

local M = {}

local METHODS = { GET = true, POST = true, PUT = true, DELETE = true, PATCH = true, HEAD = true }

--- request{method, url, headers, body, timeout, connect_timeout, max_body} ⏸
--- -> {status, headers, body, elapsed} | nil, "CODE: message", "CODE".
--- A 4xx/5xx reply is a result; failures are ETIMEDOUT, ECONNECT, EHTTP.
function M.request(req)
  if type(req) ~= "table" then error("http.request: expected a table", 2) end
  if type(req.url) ~= "string" or not req.url:match("^https?://") then
    error("http.request: url must be an http:// or https:// string", 2)
  end
  local method = req.method or "GET"
  if not METHODS[method] then error("http.request: unsupported method " .. tostring(method), 2) end
  if req.body ~= nil and type(req.body) ~= "string" then error("http.request: body must be a string", 2) end
  if req.headers ~= nil and type(req.headers) ~= "table" then
    error("http.request: headers must be a table", 2)
  end
  task._running_task("http.request")
  local op = native.http.request_start({
    method = method, url = req.url, headers = req.headers, body = req.body,
    timeout = req.timeout, connect_timeout = req.connect_timeout, max_body = req.max_body,
  })
  return task._await(op, "http.request")
end

--- stats() -> {started, in_flight, completed, failed, canceled}: transfers since the run began.
function M.stats()
  return native.http.stats()
end

--- sha256(s) -> lower-case hex digest (internal helper, used for record/replay keys).
M._sha256 = native.http.sha256

return M
