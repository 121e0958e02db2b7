-- Durability against kill -9: a kagent-rt process writing attempts is SIGKILLed mid-stream; the
-- database must open, pass PRAGMA integrity_check, and hold every attempt id the writer printed
-- (it prints an id only after db:add_attempt returned).
local mem, proc, fs = kagent.mem, kagent.proc, kagent.fs

local function binary()
  local exe = spec.build_dir .. "/kagent-rt"
  if not fs.exists(exe) then exe = kagent.root .. "/build/kagent-rt" end
  return exe
end

local function crash_once(dir, round, min_ids)
  local path = fs.join(dir, "crash" .. round .. ".db")
  local p = assert(proc.spawn({ binary(), "--log-level", "error",
    fs.join(kagent.root, "tests/mem/crash_writer.lua"), path }))
  local printed = {}
  while #printed < min_ids do
    local line, err = p:read_line(20)
    if not line then error("writer stopped early: " .. tostring(err)) end
    printed[#printed + 1] = tonumber(line)
  end
  p:kill(9)
  local res = p:wait(10)
  expect.eq(res.signal, 9, "writer ended by SIGKILL")
  -- Lines already in the pipe when the kill landed were also returned by add_attempt.
  for line in (res.stdout or ""):gmatch("[^\n]+") do printed[#printed + 1] = tonumber(line) end

  -- The writer never closed the database: its last commits live only in the WAL, which the next
  -- open must recover.
  expect.truthy(fs.exists(path .. "-wal"), "a WAL left behind by the killed writer")
  local db = assert(mem.open(path))
  expect.eq(db:query("PRAGMA integrity_check")[1].integrity_check, "ok", "integrity_check")
  expect.eq(#db:query("PRAGMA foreign_key_check"), 0, "foreign_key_check")
  local have = {}
  for _, r in ipairs(db:query("SELECT id FROM attempts")) do have[r.id] = true end
  local missing = 0
  for _, id in ipairs(printed) do
    if not have[id] then missing = missing + 1 end
  end
  expect.eq(missing, 0, "printed attempts missing after the kill (of " .. #printed .. ")")
  -- The database is still writable after recovery.
  local run = assert(db:start_run{ problem = "after-crash" })
  assert(db:add_attempt{ run_id = run })
  db:close()
  return #printed
end

describe("kagent.mem durability", function()
  it("keeps every returned attempt across kill -9 (3 kills at different points)", function()
    local dir = spec.tmpdir("mem-crash")
    local total = 0
    for round, min_ids in ipairs({ 50, 500, 2000 }) do
      total = total + crash_once(dir, round, min_ids)
    end
    expect.le(2550, total, "ids checked")
    proc.run({ "rm", "-rf", dir })
  end, { timeout = 120 })
end)
