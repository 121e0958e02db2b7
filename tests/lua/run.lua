-- A small spec runner, run by kagent-rt itself:
--   kagent-rt tests/lua/run.lua tests/lua/x_spec.lua [more specs...]
-- Specs call describe(name, fn), it(name, fn), pending(name, reason), skip(reason),
-- after_all(fn) and the expect helpers below. Each `it` runs inside its own task, so ⏸ primitives work there.
-- Prints one line per case and "N passed, N failed, N skipped"; exits 1 on any failure and
-- 77 when every case was skipped (so ctest reports the file as skipped, never as passed).
local task = kagent.task

local cases = {}
local prefix = {}

function describe(name, fn)
  prefix[#prefix + 1] = name
  fn()
  prefix[#prefix] = nil
end

function it(name, fn, opts)
  cases[#cases + 1] = { name = table.concat(prefix, " ") .. " " .. name, fn = fn, opts = opts or {} }
end

function pending(name, reason)
  cases[#cases + 1] = { name = table.concat(prefix, " ") .. " " .. name, skip = reason or "pending" }
end

-- Teardown (stop a fake server, close a pool): run in a task once every case ran, in the order
-- registered, whatever the cases did; an error in one is a failure of the file.
local teardowns = {}
function after_all(fn)
  teardowns[#teardowns + 1] = { name = table.concat(prefix, " "), fn = fn }
end

local SKIP = {}
--- Inside an `it`: marks the case skipped (e.g. no GPU) and stops it.
function skip(reason)
  error(setmetatable({ reason = reason }, SKIP), 0)
end

local function fmt(v)
  if type(v) == "string" then return string.format("%q", v) end
  if type(v) == "table" then
    local ok, s = pcall(kagent.json.encode, v)
    if ok then return s end
  end
  return tostring(v)
end

local function fail(msg, level) error(msg, (level or 1) + 2) end

expect = {}
function expect.eq(got, want, what)
  if got ~= want then fail((what and what .. ": " or "") .. "expected " .. fmt(want) .. ", got " .. fmt(got)) end
end
function expect.ne(got, other, what)
  if got == other then fail((what and what .. ": " or "") .. "expected something other than " .. fmt(other)) end
end
function expect.truthy(v, what)
  if not v then fail((what or "value") .. " is " .. fmt(v) .. ", expected truthy") end
end
function expect.falsy(v, what)
  if v then fail((what or "value") .. " is " .. fmt(v) .. ", expected false/nil") end
end
function expect.near(got, want, tol, what)
  if type(got) ~= "number" or math.abs(got - want) > tol then
    fail((what and what .. ": " or "") .. "expected " .. want .. " ± " .. tol .. ", got " .. fmt(got))
  end
end
function expect.lt(a, b, what)
  if not (a < b) then fail((what and what .. ": " or "") .. "expected " .. fmt(a) .. " < " .. fmt(b)) end
end
function expect.le(a, b, what)
  if not (a <= b) then fail((what and what .. ": " or "") .. "expected " .. fmt(a) .. " <= " .. fmt(b)) end
end
function expect.match(s, pattern, what)
  if type(s) ~= "string" or not s:find(pattern) then
    fail((what and what .. ": " or "") .. "expected " .. fmt(s) .. " to match " .. fmt(pattern))
  end
end
function expect.no_match(s, pattern, what)
  if type(s) == "string" and s:find(pattern, 1, true) then
    fail((what and what .. ": " or "") .. "expected " .. fmt(s) .. " not to contain " .. fmt(pattern))
  end
end
function expect.same(got, want, what)
  local a, b = kagent.json.encode(got), kagent.json.encode(want)
  if a ~= b then fail((what and what .. ": " or "") .. "expected " .. b .. ", got " .. a) end
end
function expect.errors(fn, pattern)
  local ok, err = pcall(fn)
  if ok then fail("expected an error") end
  if pattern and not tostring(err):find(pattern) then
    fail("error " .. fmt(tostring(err)) .. " does not match " .. fmt(pattern))
  end
  return err
end

--- Path helpers for specs.
spec = {
  root = kagent.root,
  build_dir = os.getenv("KAGENT_BUILD_DIR") or (kagent.root .. "/build"),
  python = os.getenv("KAGENT_PYTHON") or "python3",
}
-- spec.count(text, plain) -> how many times the plain string occurs in text (a message said once)
function spec.count(text, plain)
  local n, at = 0, 1
  while true do
    local i = text:find(plain, at, true)
    if not i then return n end
    n, at = n + 1, i + #plain
  end
end

-- Folders from spec.tmpdir are removed when the specs end (KAGENT_KEEP_TMP=1 keeps them).
local tmpdirs = {}
function spec.tmpdir(tag)
  local base = os.getenv("TMPDIR")
  if base == nil or base == "" then base = "/tmp" end
  local dir = string.format("%s/kagent-spec-%s-%d-%d", base, tag or "x", math.floor(kagent.time.wall() * 1e3), math.random(1, 1e9))
  kagent.fs.mkdir_p(dir)
  tmpdirs[#tmpdirs + 1] = dir
  return dir
end

-- remove_tree(path) -> true, or nil, err naming what could not be removed
local function remove_tree(path)
  local fs = kagent.fs
  if fs.is_dir(path) then
    for _, n in ipairs(fs.list(path) or {}) do
      local ok, err = remove_tree(path .. "/" .. n)
      if not ok then return nil, err end
    end
  end
  -- (a link whose target went first does not "exist", but is there to remove)
  local ok, err = fs.remove(path)
  if ok or not fs.exists(path) then return true end
  return nil, err
end

io.stdout:setvbuf("line")
math.randomseed(math.floor(kagent.time.wall() * 1e6) % 2147483647)
for _, path in ipairs(kagent.args) do
  local chunk, err = loadfile(path)
  if not chunk then
    io.stderr:write(err, "\n")
    os.exit(1)
  end
  chunk()
end

local passed, failed, skipped = 0, 0, 0
for _, c in ipairs(cases) do
  if c.skip then
    skipped = skipped + 1
    print("SKIP " .. c.name .. " (" .. c.skip .. ")")
  else
    local t0 = kagent.time.now()
    local t = task.spawn({ fn = c.fn, name = "spec" })
    local timeout = c.opts.timeout or 120
    local guard = task.spawn(function()
      task.sleep(timeout)
      task.kill(t)
    end)
    local ok, err = task.wait(t)
    task.kill(guard)
    local dt = kagent.time.now() - t0
    if ok then
      passed = passed + 1
      print(string.format("ok   %s (%.2fs)", c.name, dt))
    elseif type(err) == "table" and getmetatable(err) == SKIP then
      skipped = skipped + 1
      print("SKIP " .. c.name .. " (" .. tostring(err.reason) .. ")")
    else
      failed = failed + 1
      if tostring(err):find("ECANCELED") then err = "timed out after " .. timeout .. " s" end
      print(string.format("FAIL %s (%.2fs)\n     %s", c.name, dt, tostring(err):gsub("\n", "\n     ")))
    end
  end
end
for _, t in ipairs(teardowns) do
  local ok, err = task.wait(task.spawn({ fn = t.fn, name = "after_all" }))
  if not ok then
    failed = failed + 1
    print(string.format("FAIL after_all of %s\n     %s", t.name, tostring(err):gsub("\n", "\n     ")))
  end
end
for _, dir in ipairs(tmpdirs) do
  if os.getenv("KAGENT_KEEP_TMP") == "1" then
    print("kept " .. dir)
  else
    local ok, err = remove_tree(dir)
    if not ok or kagent.fs.exists(dir) then
      failed = failed + 1
      print("FAIL cleanup: cannot remove " .. dir .. ": " .. tostring(err))
    end
  end
end
print(string.format("%d passed, %d failed, %d skipped", passed, failed, skipped))
if failed > 0 then return 1 end
if passed == 0 and skipped > 0 then return 77 end
return 0
