---@meta
-- Generated from docs/lua-api.md by scripts/gen_lua_types.lua: do not edit; run
-- `build/kagent-rt scripts/gen_lua_types.lua` after changing the docs.

---@class kagent.http
local http = {}

---`http.request{method, url, headers, body, timeout, connect_timeout, idle_timeout, start_timeout, max_body}` ⏸ →
---  `{status, headers, body, elapsed}`, or `nil, "CODE: message", "CODE"`.
---  - `method`: `"GET"` (default), `"POST"`, `"PUT"`, `"DELETE"`, `"PATCH"`, `"HEAD"`.
---  - `url`: `http://` or `https://` (required; anything else raises).
---  - `headers`: table `{["name"] = "value"}`.
---  - `body`: request body (string).
---  - `timeout`: total seconds for the transfer (default 600); `connect_timeout`: seconds to connect
---    (default 10); `idle_timeout`: seconds in which no byte moves either way before the transfer is
---    a stall (default none); `start_timeout`: seconds until the reply's status and headers are in
---    (default none; a server that streams sends them at once, so this tells a dead server quickly).
---  - `max_body`: reply bytes kept (default 256 MiB); a larger reply fails with `ETOOBIG` (the same
---    request would bring it again, so callers do not retry it).
---  - Result: `status` (number), `headers` (table keyed by lower-case name; a repeated header keeps
---    the last value), `body` (string), `elapsed` (seconds).
---  - A 4xx/5xx reply is a result, not a failure. Failures: `ETIMEDOUT` (its message says what ran
---    out: `could not connect within N s (connect timeout)`, `the server accepted the request but sent
---    no reply for N s (idle timeout)` (or `(start timeout)`), `the reply stalled: no data for N s after B body bytes (idle
---    timeout)`, `no reply within the N s timeout`, `the reply was not complete within the N s
---    timeout`), `ECONNECT` (refused, DNS, TLS), `EHTTP` (any other transport error, e.g. the server
---    closed the connection mid-reply). Messages name the URL without its query or credentials.
---    Killing the task aborts the transfer at once.
---@param args table
---@return kagent.http.Response?, string?, string?
function http.request(args) end

---`http.stream{...same fields as request...}` ⏸ → `stream` once the status and headers are in, or
---  `nil, "CODE: message", "CODE"` (as `request`). The body is not collected: it is read as it
---  arrives. `stream.status`, `stream.headers` as in a result.
---  - `stream:read()` ⏸ → the body bytes that arrived since the last read (a string, cut anywhere),
---    `nil` at the end, or `nil, "CODE: message", "CODE"` when the transfer failed (a stall is
---    `ETIMEDOUT` after `idle_timeout`). The task parks until bytes arrive (no polling). One task
---    reads a stream at a time.
---  - `stream:body()` ⏸ → the rest of the body as one string, or `nil, err, code`.
---  - `stream:close()` aborts the transfer (idempotent); so does killing the reading task, and
---    dropping the stream (garbage collection).
---@param args table
---@return any
function http.stream(args) end

---`http.stats()` → `{started, in_flight, completed, failed, canceled}`: transfers since the run
---  began (counts only; used to show that a replayed run makes no request).
---@return any
function http.stats() end

return http
