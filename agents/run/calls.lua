-- The LLM calls of a run: where in the search each call is asked (its place), the key it is
-- recorded and replayed under, and one usage row per call, kept in memory (kagent.mem's
-- llm_calls) and in the run directory (usage.csv, and replay_misses.json for questions a replay
-- had no answer to).
--
-- Why a place: prompts carry measured timings and counters, which differ from run to run, so a
-- key over the whole request never replays. A call is keyed instead on its place in the run —
-- policy, round, parent fingerprint, role, worker, and which call of that place it is — plus the
-- request with its measurements masked (stable_text). A replayed run that reaches the same place
-- with the same question gets the recorded answer; a different question there is a miss.
local fs = require("kagent.fs")
local json = require("kagent.json")
local log = require("kagent.log")
local task = require("kagent.task")
local ktime = require("kagent.time")
local fingerprint = require("agents.lib.fingerprint")

local M = {}

-- Places by task: the driver says where a worker (or a parent's planning) is; the roles it calls
-- inherit it without taking it as an argument.
local places = setmetatable({}, { __mode = "k" })

-- at(place): the current task works at place {round, parent, worker} from now on
function M.at(place)
  local t = task.current()
  if t then places[t] = place end
end

function M.place()
  local t = task.current()
  return t and places[t] or {}
end

-- mask(text) -> text with every number replaced by "#": timings, counters, sizes, ids
local function mask(text)
  return (text:gsub("%d+%.?%d*", "#"))
end

-- stable_text(text) -> the measurement-free parts of a prompt: Python code blocks as they are
-- (a kernel's constants are part of the question), everything else with its numbers masked.
function M.stable_text(text)
  local out, pos = {}, 1
  while true do
    local s, e = text:find("```python\n", pos, true)
    if not s then
      out[#out + 1] = mask(text:sub(pos))
      break
    end
    out[#out + 1] = mask(text:sub(pos, e))
    local close = text:find("```", e + 1, true)
    if not close then
      out[#out + 1] = text:sub(e + 1)
      break
    end
    out[#out + 1] = text:sub(e + 1, close - 1)
    pos = close
  end
  return table.concat(out)
end

M.CSV_COLUMNS = { "seq", "time", "role", "policy", "round", "parent", "worker", "attempt", "provider", "model",
  "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost_usd", "latency_s", "replayed",
  "outcome", "key" }

local function csv_field(v)
  if v == nil or v == json.null then return "" end
  local s = tostring(v)
  if s:find('[,"\n\r]') then s = '"' .. s:gsub('"', '""') .. '"' end
  return s
end

-- csv_line(values, n) -> one CSV line of values[1..n] (nil fields are empty)
function M.csv_line(values, n)
  local out = {}
  for i = 1, n or #values do out[i] = csv_field(values[i]) end
  return table.concat(out, ",") .. "\n"
end

-- read_csv(path) -> array of rows keyed by the header's names (numbers as numbers), or {} when
-- there is no file. Reads what csv_line writes (quoted fields included).
function M.read_csv(path)
  local text = fs.read(path)
  if not text then return {} end
  local rows, header = {}, nil
  local i, n = 1, #text
  while i <= n do
    local fields = {}
    while true do
      local v
      if text:sub(i, i) == '"' then
        local buf, j = {}, i + 1
        while j <= n do
          local c = text:sub(j, j)
          if c == '"' then
            if text:sub(j + 1, j + 1) == '"' then buf[#buf + 1] = '"'; j = j + 2 else j = j + 1; break end
          else
            buf[#buf + 1] = c
            j = j + 1
          end
        end
        v, i = table.concat(buf), j
      else
        local j = i
        while j <= n and not text:sub(j, j):match("[,\n]") do j = j + 1 end
        v, i = text:sub(i, j - 1):gsub("\r$", ""), j
      end
      fields[#fields + 1] = v
      local c = text:sub(i, i)
      i = i + 1
      if c ~= "," then break end
    end
    if not header then
      header = fields
    elseif #fields > 1 or fields[1] ~= "" then
      local row = {}
      for k, name in ipairs(header) do
        local v = fields[k]
        row[name] = v ~= "" and (tonumber(v) or v) or nil
      end
      rows[#rows + 1] = row
    end
  end
  return rows
end

-- Log of one run's calls ----------------------------------------------------------------------------

local Log = {}
Log.__index = Log

-- new{rd, mem, policy} -> log. rd: the run directory, mem: the run's memory handle
-- (agents/run/memory.lua; nil: no rows in memory).
function M.new(o)
  local self = setmetatable({ rd = o.rd, mem = o.mem, policy = o.policy or "?", seq = 0, counts = {},
    csv = o.rd:path("usage.csv") }, Log)
  -- a resumed run goes on numbering its calls after the last one recorded
  for _, row in ipairs(M.read_csv(self.csv)) do
    if type(row.seq) == "number" and row.seq > self.seq then self.seq = row.seq end
  end
  return self
end

-- key(tag, system, text) -> place {policy, round, parent, role, worker, attempt}, replay key.
-- The n-th call of a role at one place is attempt n (a worker's calls are sequential, so n is
-- the same in a replay).
function Log:key(tag, system, text)
  local at = M.place()
  local p = { policy = self.policy, round = at.round or "-", parent = at.parent or "-", role = tag or "?",
    worker = at.worker or "-" }
  local where = table.concat({ p.policy, tostring(p.round), tostring(p.parent), p.role, tostring(p.worker) }, "/")
  self.counts[where] = (self.counts[where] or 0) + 1
  p.attempt = self.counts[where]
  return p, where .. "/" .. p.attempt .. "\n" .. M.stable_text((system or "") .. "\n\n" .. text)
end

local function num(v) return type(v) == "number" and v or 0 end

-- record(place, key, res, err, code, model): one call's row in usage.csv and memory; a miss of
-- the replay (EREPLAY) is also listed in replay_misses.json with its place.
function Log:record(p, key, res, err, code, model)
  self.seq = self.seq + 1
  local u = res and res.usage or {}
  local provider, name = tostring(model or "?"):match("^(%w+):(.+)$")
  local row = { seq = self.seq, time = os.date("!%Y-%m-%dT%H:%M:%SZ"), role = p.role, policy = p.policy,
    round = p.round, parent = p.parent, worker = p.worker, attempt = p.attempt,
    provider = res and res.provider or provider, model = res and res.model or name or model,
    input_tokens = num(u.input_tokens), output_tokens = num(u.output_tokens),
    cache_read_tokens = num(u.cache_read_tokens), cache_write_tokens = num(u.cache_write_tokens),
    cost_usd = res and num(res.cost_usd) or 0, latency_s = res and res.latency or 0,
    replayed = res and res.cached == true or false, outcome = res and "ok" or tostring(code or "error"),
    key = fingerprint.hash(key) }
  local values = {}
  for i, c in ipairs(M.CSV_COLUMNS) do values[i] = row[c] end
  local ok, aerr = true, nil
  if not fs.exists(self.csv) then ok, aerr = fs.append(self.csv, M.csv_line(M.CSV_COLUMNS)) end
  if ok then ok, aerr = fs.append(self.csv, M.csv_line(values, #M.CSV_COLUMNS)) end
  if not ok and self.rd.failed then self.rd:failed(self.csv, aerr) end  -- stops the run (agents/run/writes.lua)
  if self.mem and self.mem.run_id then
    local ok, derr = self.mem.db:add_llm_call({ run_id = self.mem.run_id, seq = row.seq, role = row.role,
      place = table.concat({ row.policy, tostring(row.round), tostring(row.parent), row.role, tostring(row.worker),
        tostring(row.attempt) }, "/"), provider = row.provider, model = row.model, input_tokens = row.input_tokens,
      output_tokens = row.output_tokens, cache_read_tokens = row.cache_read_tokens,
      cache_write_tokens = row.cache_write_tokens, cost_usd = row.cost_usd, latency = row.latency_s,
      replayed = row.replayed, outcome = row.outcome, replay_key = row.key })
    if not ok then
      if self.mem.failed then self.mem:failed(derr) else log.warn("memory: cannot record an LLM call: %s", tostring(derr)) end
    end
  end
  if code == "EREPLAY" then
    local path = self.rd:path("replay_misses.json")
    local list = json.decode(fs.read(path) or "[]")
    if type(list) ~= "table" then list = {} end
    list[#list + 1] = { seq = row.seq, role = row.role, policy = row.policy, round = row.round, parent = row.parent,
      worker = row.worker, attempt = row.attempt, key = row.key, error = tostring(err), at = ktime.wall() }
    self.rd:write("replay_misses.json", list)
  end
end

-- Totals ----------------------------------------------------------------------------------------------

-- replay(rows, mode) -> {mode, calls, hits, misses, sent}: what the record/replay cache answered
-- over a run's calls (every process of a resumed run: rows from usage.csv)
function M.replay(rows, mode)
  local r = { mode = mode or "off", calls = #rows, hits = 0, misses = 0, sent = 0 }
  for _, row in ipairs(rows) do
    if row.replayed == "true" or row.replayed == true then r.hits = r.hits + 1
    elseif row.outcome == "EREPLAY" then r.misses = r.misses + 1
    elseif row.outcome == "ok" then r.sent = r.sent + 1 end
  end
  return r
end

-- by_role(rows) -> array of {role, calls, input_tokens, output_tokens, cache_read_tokens,
-- cache_write_tokens, tokens, cost_usd, latency_s}, by role name
function M.by_role(rows)
  local t, order = {}, {}
  for _, row in ipairs(rows) do
    local k = tostring(row.role or "?")
    if not t[k] then
      t[k] = { role = k, calls = 0, input_tokens = 0, output_tokens = 0, cache_read_tokens = 0, cache_write_tokens = 0,
        cost_usd = 0, latency_s = 0 }
      order[#order + 1] = k
    end
    local e = t[k]
    e.calls = e.calls + 1
    for _, f in ipairs({ "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost_usd", "latency_s" }) do
      e[f] = e[f] + num(row[f])
    end
  end
  table.sort(order)
  local out = {}
  for i, k in ipairs(order) do
    local e = t[k]
    e.tokens = kagent.llm.total_tokens(e)
    out[i] = e
  end
  return out
end

return M
