-- kagent.mem: memory on SQLite. This file opens databases and gives generic access; the typed
-- short-term (kagent.mem.trajectory) and long-term (kagent.mem.knowledge) functions are SQL
-- over db:exec/db:query, added to the same `db` object. Calls never yield: SQLite in WAL mode
-- commits in microseconds, and a call that cannot be interrupted needs no locking between tasks.
local native = require("kagent.native")
local json = require("kagent.json")

local nm = native.mem
local M = {}

M.SCHEMA_VERSION = nm.SCHEMA_VERSION

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

--- open(path) -> db, or nil, "EDB: ...", "EDB". Creates and migrates the schema.
function M.open(path)
  if path ~= nil and type(path) ~= "string" then
    error("mem.open: path must be a string, got " .. type(path), 2)
  end
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
  local handle, err, code = nm.open(path)
  if not handle then return nil, err, code end
  return setmetatable({ _h = handle, _path = path }, Db)
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
  return nm.exec(h, sql, params)
end

--- db:query(sql, params) -> array of rows | nil, "EDB: ...", "EDB".
function Db:query(sql, params)
  local h = handle(self, "db:query")
  if type(sql) ~= "string" then error("db:query: sql must be a string", 2) end
  if params ~= nil and type(params) ~= "table" then error("db:query: params must be a table", 2) end
  return nm.query(h, sql, params)
end

--- db:merge(path) -> {runs = n, attempts = n, ...} rows added per table | nil, "EDB: ...", "EDB".
--- Copies in the rows of another kagent-rt database that this one lacks (store/merge.hpp says
--- how rows are matched); merging the same file twice adds nothing.
function Db:merge(path)
  local h = handle(self, "db:merge")
  if type(path) ~= "string" then error("db:merge: path must be a string", 2) end
  if nm.in_transaction(h) then error("db:merge: not inside a transaction", 2) end
  return nm.merge(h, path)
end

-- Like exec/query but raise on EDB: for the typed functions, which turn it back into nil, err.
local DbFailure = {}
function M._fail(err, code)
  error(setmetatable({ err = err, code = code }, DbFailure), 0)
end
function M._x(db, sql, params)
  local changes, id_or_err, code = nm.exec(db._h, sql, params or {})
  if changes == nil then M._fail(id_or_err, code) end
  return changes, id_or_err
end
function M._q(db, sql, params)
  local rows, err, code = nm.query(db._h, sql, params or {})
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
  local ok, err = nm.exec(h, "BEGIN IMMEDIATE")
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
  local c, err2, code = nm.exec(h, "COMMIT")
  if not c then
    nm.exec(h, "ROLLBACK")
    return nil, err2, code
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
