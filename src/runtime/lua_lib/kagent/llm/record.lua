-- The record/replay store: request key -> stored reply, in SQLite through kagent.mem.
-- Kept behind get/put so llm.lua does not depend on the database's layout.
local M = {}

local CREATE = [[CREATE TABLE IF NOT EXISTS llm_cache(
  key TEXT PRIMARY KEY, request TEXT NOT NULL, response TEXT NOT NULL,
  created REAL NOT NULL DEFAULT (unixepoch('subsec')))]]

--- open(db_or_path) -> store {get(key) -> response|nil, put(key, request, response)} or nil, err, code.
function M.open(db)
  if db == nil or type(db) == "string" then
    local ok, mem = pcall(require, "kagent.mem")
    if not ok or type(mem) ~= "table" or not mem.open then
      return nil, "ENOTSUP: record/replay needs kagent.mem (SQLite), which is not available", "ENOTSUP"
    end
    local path = db or os.getenv("KAGENT_LLM_DB") or os.getenv("KAGENT_DB")
    local opened, err, code = mem.open(path)
    if not opened then return nil, err, code end
    db = opened
  end
  if db.cache_get and db.cache_put then
    return {
      get = function(key) return (db:cache_get(key)) end,
      put = function(key, request, response) return db:cache_put(key, request, response) end,
      db = db,
    }
  end
  -- A database handle without the cache helpers: use a table of our own.
  local ok, err, code = db:exec(CREATE)
  if ok == nil then return nil, err, code end
  return {
    get = function(key)
      local rows = db:query("SELECT response FROM llm_cache WHERE key = ?", { key })
      return rows and rows[1] and rows[1].response or nil
    end,
    put = function(key, request, response)
      return db:exec("INSERT OR REPLACE INTO llm_cache(key, request, response) VALUES (?, ?, ?)",
        { key, request, response })
    end,
    db = db,
  }
end

return M
