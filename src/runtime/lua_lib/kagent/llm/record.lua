-- kagent.llm, record/replay: the key of a request, and the store of request key -> reply, in
-- SQLite through kagent.mem (kept behind get/put so the call does not depend on the database's
-- layout). llm.chat records the replies it gets and replays them by key (docs/lua-api.md).
local http = require("kagent.http")
local json = require("kagent.json")
local log = require("kagent.log")

local M = {}

local store               -- the run's store, opened on first use (M.store)
local occurrences = {}    -- request key -> times asked in this run

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

--- store(db) -> the run's store, opened from `db` (llm.configure{db}, else $KAGENT_LLM_DB or
--- $KAGENT_DB) on first use, or nil, err, code.
function M.store(db)
  if store then return store end
  local s, err, code = M.open(db)
  if not s then return nil, err, code end
  store = s
  return store
end

--- forget(): the next store() opens the store again (llm.configure{db} or {reset}).
function M.forget() store = nil end

--- key(r, replay_key, body_text) -> the request's key. It covers what decides the reply (provider
--- and body, which names the model). Headers (and so the API key) and the base URL are left out,
--- so a record replays behind any relay. A caller's replay_key (its place in a run and the parts
--- of the request that do not change from run to run) replaces the body, so a run whose prompts
--- carry fresh measurements replays. The n-th identical request of a run has its own entry, so
--- workers that send the same prompt (sampling differs) replay the replies they got, in the
--- order they asked.
function M.key(r, replay_key, body_text)
  local key
  if replay_key then
    key = "k:" .. http._sha256(r.provider .. "\n" .. r.model .. "\n" .. replay_key)
  else
    key = http._sha256(r.provider .. "\n" .. body_text)
  end
  local n = (occurrences[key] or 0) + 1
  occurrences[key] = n
  if n > 1 then key = key .. "#" .. n end
  return key
end

--- replayed(s, key) -> the reply recorded under key ({text, usage, stop_reason, truncated,
--- model, tag}), or nil.
function M.replayed(s, key)
  local stored = s.get(key)
  if not stored then return nil end
  local parsed = json.decode(stored)
  if type(parsed) == "table" and type(parsed.text) == "string" then return parsed end
  return nil
end

--- save(s, key, body_text, parsed, tag): records a reply (a failure to is only warned about).
function M.save(s, key, body_text, parsed, tag)
  local stored = json.encode({ text = parsed.text, usage = parsed.usage, stop_reason = parsed.stop_reason,
                               truncated = parsed.truncated, model = parsed.model, tag = tag })
  local ok, perr = s.put(key, body_text, stored)
  if ok == nil then log.warn("llm: could not record a reply: %s", tostring(perr)) end
end

return M
