---@meta
-- Generated from docs/lua-api.md by scripts/gen_lua_types.lua: do not edit; run
-- `build/kagent-rt scripts/gen_lua_types.lua` after changing the docs.

---@class kagent.http
local http = {}

---`http.request{method, url, headers, body, timeout, connect_timeout, max_body}` ⏸ →
---  `{status, headers, body, elapsed}`, or `nil, "CODE: message", "CODE"`.
---  - `method`: `"GET"` (default), `"POST"`, `"PUT"`, `"DELETE"`, `"PATCH"`, `"HEAD"`.
---  - `url`: `http://` or `https://` (required; anything else raises).
---  - `headers`: table `{["name"] = "value"}`.
---  - `body`: request body (string).
---  - `timeout`: total seconds for the transfer (default 600); `connect_timeout`: seconds to connect
---    (default 10).
---  - `max_body`: reply bytes kept (default 256 MiB); a larger reply fails with `EHTTP`.
---  - Result: `status` (number), `headers` (table keyed by lower-case name; a repeated header keeps
---    the last value), `body` (string), `elapsed` (seconds).
---  - A 4xx/5xx reply is a result, not a failure. Failures: `ETIMEDOUT` (connect or total timeout),
---    `ECONNECT` (refused, DNS, TLS), `EHTTP` (any other transport error, e.g. the server closed
---    the connection mid-reply). Killing the task aborts the transfer at once.
---@param args table
---@return any
function http.request(args) end

---`http.stats()` → `{started, in_flight, completed, failed, canceled}`: transfers since the run
---  began (counts only; used to show that a replayed run makes no request).
---@return any
function http.stats() end

return http
