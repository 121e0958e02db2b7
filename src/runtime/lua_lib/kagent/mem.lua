-- kagent.mem: memory on SQLite. This file opens databases and gives generic access; the typed
-- short-term (kagent.mem.trajectory) and long-term (kagent.mem.knowledge) functions are SQL
-- over db:exec/db:query, added to the same `db` object. Calls yield only while another process
-- holds the database locked (retry_busy below): SQLite in WAL mode commits in microseconds, and a
-- call that is not interrupted needs no locking between tasks.
local native = require("kagent.native")
local json = require("kagent.json")

local nm = native.mem
local M = {}

M.SCHEMA_VERSION = nm.SCHEMA_VERSION

-- How long, in seconds, a call waits for a database that another process holds locked before it
-- fails with EDB (docs/lua-api.md, kagent.mem); mem.open(path, {busy_wait = s}) sets it per db.
M.BUSY_WAIT = 60

-- retry_busy(wait, path, fn, ...) -> fn(...)'s results (at most three: the binding's). The binding
-- sets no busy timeout (SQLite's would sleep on the event loop's thread, stalling every task) and
-- answers a lock held by another process with EBUSY at once; here the calling task sleeps
-- (kagent.task.sleep: other tasks run) and tries again, 10 ms doubling to 1 s, for at most `wait`
-- seconds in all. Then, or where no task can sleep (outside a task; inside db:transaction's fn,
-- whose coroutine must not yield), the failure is EDB naming the file and how long it waited.
local function retry_busy(wait, path, fn, ...)
  local a, b, c = fn(...)
  if a ~= nil or c ~= "EBUSY" then return a, b, c end
  local task, now = require("kagent.task"), require("kagent.time").now
  local t0, pause = now(), 0.01
  while a == nil and c == "EBUSY" and task.current() do
    local left = wait - (now() - t0)
    if left <= 0 then break end
    task.sleep(math.min(pause, left))
    pause = math.min(pause * 2, 1)
    a, b, c = fn(...)
  end
  if a == nil and c == "EBUSY" then
    return nil, string.format("EDB: %s is locked by another process (waited %.1f s, at most %g s): %s", tostring(path),
      now() - t0, wait, (tostring(b):gsub("^EBUSY: ", ""))), "EDB"
  end
  return a, b, c
end

-- call(db, fn, ...) -> nm.fn(db's handle, ...) retried while the database is locked
local function call(db, fn, ...)
  return retry_busy(db._busy_wait, db._path, fn, ...)
end

-- Columns stored as JSON text, decoded by M.decode.
local JSON_COLUMNS = { "config", "summary", "metrics", "lessons", "avoid", "try", "tags", "parents" }
-- Columns stored as 1/0 that the typed functions return as booleans.
local BOOL_COLUMNS = { "correct", "success", "diagnosis_correct", "fix_effective" }

local Db = {}
Db.__index = Db
M._Db = Db

--- The default database path: $KAGENT_DB, else runs/kagent.db under the current directory.
function M.default_path()
  local env = os.getenv("KAGENT_DB")
  if env and env ~= "" then return env end
  return "runs/kagent.db"
end

local function parent_dir(path)
  return path:match("^(.*)/[^/]*$")
end

--- open(path, {busy_wait = M.BUSY_WAIT}) -> db, or nil, "EDB: ...", "EDB". Creates and migrates
--- the schema.
function M.open(path, opts)
  if path ~= nil and type(path) ~= "string" then
    error("mem.open: path must be a string, got " .. type(path), 2)
  end
  -- opts that are not a table are ignored: mem.open(assert(path, msg)) passes msg along
  local wait = (type(opts) == "table" and opts.busy_wait) or M.BUSY_WAIT
  if type(wait) ~= "number" or wait < 0 then error("mem.open: busy_wait must be a number >= 0", 2) end
  path = path or M.default_path()
  if path ~= ":memory:" and not path:find("^file:") then
    local dir = parent_dir(path)
    if dir and dir ~= "" then
      local fs = require("kagent.fs")
      if not fs.is_dir(dir) then
        local ok, err = fs.mkdir_p(dir)
        if not ok then return nil, "EDB: cannot create " .. dir .. ": " .. tostring(err), "EDB" end
      end
    end
  end
  local handle, err, code = retry_busy(wait, path, nm.open, path)
  if not handle then return nil, err, code end
  return setmetatable({ _h = handle, _path = path, _busy_wait = wait }, Db)
end

--- Decodes the JSON columns of `row` in place (a field that fails to parse stays a string).
function M.decode(row)
  if type(row) ~= "table" then return row end
  for _, k in ipairs(JSON_COLUMNS) do
    local v = row[k]
    if type(v) == "string" then
      local d = json.decode(v)
      if d ~= nil then row[k] = d end
    end
  end
  return row
end

function M.decode_rows(rows)
  for _, r in ipairs(rows) do M.decode(r) end
  return rows
end

-- Internal helpers shared by the typed halves.

-- SQL for a new row's uid (schema version 2): the time in microseconds, then 80 random bits from
-- SQLite's generator (seeded from the OS), so rows written in different processes and files
-- never share one, and new uids sort last: each insert touches the last page of the uid index
-- rather than a random one. (Rows inserted by hand get a random uid from the schema's triggers.)
M._NEW_UID = "printf('%014x', CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)) || lower(hex(randomblob(10)))"

function M._booleans(row)
  if row then
    for _, k in ipairs(BOOL_COLUMNS) do
      local v = row[k]
      if v ~= nil and type(v) ~= "boolean" then row[k] = (v ~= 0) end
    end
  end
  return row
end

function M._encode(v)
  if v == nil or type(v) == "string" then return v end
  return json.encode(v)
end

function M._check_table(fname, t)
  if type(t) ~= "table" then error(fname .. ": expected a table argument, got " .. type(t), 3) end
end

function M._check_fields(fname, t, allowed)
  for k in pairs(t) do
    if not allowed[k] then error(fname .. ": unknown field '" .. tostring(k) .. "'", 3) end
  end
end

function M._require(fname, t, key, ty)
  local v = t[key]
  if type(v) ~= ty then error(fname .. ": field '" .. key .. "' must be a " .. ty .. ", got " .. type(v), 3) end
  return v
end

local function handle(db, fname)
  if getmetatable(db) ~= Db then error(fname .. ": call it as db:" .. fname:match("[%w_]+$") .. "(...)", 3) end
  if not db._h or not nm.is_open(db._h) then error(fname .. ": database is closed", 3) end
  return db._h
end
M._handle = handle

--- db:exec(sql, params) -> changes, last_insert_id | nil, "EDB: ...", "EDB".
function Db:exec(sql, params)
  local h = handle(self, "db:exec")
  if type(sql) ~= "string" then error("db:exec: sql must be a string", 2) end
  if params ~= nil and type(params) ~= "table" then error("db:exec: params must be a table", 2) end
  return call(self, nm.exec, h, sql, params)
end

--- db:query(sql, params) -> array of rows | nil, "EDB: ...", "EDB".
function Db:query(sql, params)
  local h = handle(self, "db:query")
  if type(sql) ~= "string" then error("db:query: sql must be a string", 2) end
  if params ~= nil and type(params) ~= "table" then error("db:query: params must be a table", 2) end
  return call(self, nm.query, h, sql, params)
end

--- db:merge(path) -> {runs = n, attempts = n, ...} rows added per table | nil, "EDB: ...", "EDB".
--- Copies in the rows of another kagent-rt database that this one lacks (store/merge.hpp says
--- how rows are matched); merging the same file twice adds nothing.
function Db:merge(path)
  local h = handle(self, "db:merge")
  if type(path) ~= "string" then error("db:merge: path must be a string", 2) end
  if nm.in_transaction(h) then error("db:merge: not inside a transaction", 2) end
  return call(self, nm.merge, h, path)
end

-- Like exec/query but raise on EDB: for the typed functions, which turn it back into nil, err.
local DbFailure = {}
function M._fail(err, code)
  error(setmetatable({ err = err, code = code }, DbFailure), 0)
end
function M._x(db, sql, params)
  local changes, id_or_err, code = call(db, nm.exec, db._h, sql, params or {})
  if changes == nil then M._fail(id_or_err, code) end
  return changes, id_or_err
end
function M._q(db, sql, params)
  local rows, err, code = call(db, nm.query, db._h, sql, params or {})
  if rows == nil then M._fail(err, code) end
  return rows
end

--- Builds " AND col = :col ..." for the filters in `t` that are set (a NULL-tolerant
--- "(:x IS NULL OR col = :x)" would stop SQLite from using an index). `cols` maps a filter name
--- to its column expression. The SQL varies only with which filters are set, so the statement
--- cache holds a few variants at most.
function M._filters(t, names, cols)
  local parts = {}
  for _, name in ipairs(names) do
    if t[name] ~= nil then
      parts[#parts + 1] = " AND " .. ((cols and cols[name]) or name) .. " = :" .. name
    end
  end
  return table.concat(parts)
end

--- Wraps a typed function: arguments are checked (raising), then EDB failures raised inside by
--- _x/_q become nil, "EDB: ...", "EDB" returns.
local function method_results(ok, ...)
  if ok then return ... end
  local e = ...
  if getmetatable(e) == DbFailure then return nil, e.err, e.code end
  error(e, 0)
end

function M._method(fname, fn)
  return function(db, ...)
    handle(db, fname)
    return method_results(pcall(fn, db, ...))
  end
end

--- db:transaction(fn) -> results of fn(db). fn must not yield.
function Db:transaction(fn)
  local h = handle(self, "db:transaction")
  if type(fn) ~= "function" then error("db:transaction: expected a function", 2) end
  if nm.in_transaction(h) then error("db:transaction: already inside a transaction", 2) end
  -- BEGIN waits for another process's lock (before fn runs, so no other task's write can join);
  -- COMMIT is not retried: a task sleeping with the transaction open would let them join.
  local ok, err = call(self, nm.exec, h, "BEGIN IMMEDIATE")
  if not ok then return nil, err, "EDB" end
  -- A coroutine of its own catches a yield (a ⏸ call) before it can park the calling task
  -- while the write lock is held and other tasks' writes join this transaction.
  local co = coroutine.create(fn)
  local res = { coroutine.resume(co, self) }
  local yielded = res[1] and coroutine.status(co) ~= "dead"
  if not res[1] or yielded then
    nm.exec(h, "ROLLBACK")
    if yielded then error("db:transaction: fn must not yield", 2) end
    local e = res[2]
    if getmetatable(e) == DbFailure then return nil, e.err, e.code end
    error(e, 0)
  end
  local c, err2 = nm.exec(h, "COMMIT")
  if not c then
    nm.exec(h, "ROLLBACK")
    return nil, (tostring(err2):gsub("^EBUSY:", "EDB:")), "EDB"
  end
  return unpack(res, 2, table.maxn(res))
end

function Db:close()
  if self._h then nm.close(self._h) end
  self._h = nil
end

function Db:path()
  return nm.path(handle(self, "db:path"))
end

function Db:schema_version()
  return nm.schema_version(handle(self, "db:schema_version"))
end

Db.__tostring = function(db) return "kagent.mem.db<" .. tostring(db._path) .. ">" end

require("kagent.mem.trajectory")(M, Db)
require("kagent.mem.knowledge")(M, Db)

return M
