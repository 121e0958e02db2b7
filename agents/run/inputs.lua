-- The command line of an entry script and what it names, checked before any work starts: the
-- options (agents/run/args.lua), the problem and kernel files, the devices --devices asks for and
-- the memory database. Each check says what is wrong on stderr and returns the exit status.
local fs = require("kagent.fs")
local args = require("agents.run.args")
local options = require("agents.run.options")

local M = {}

-- die(msg[, code]) -> nil, msg, code (default 2) after writing msg to stderr: how a step of the
-- start-up refuses its input
local function die(msg, code)
  io.stderr:write(msg .. "\n")
  return nil, msg, code or 2
end
M.die = die

-- unreadable(prog, what, path, err) -> die's answer for a file fs.read refused, with its reason
-- ("No such file or directory", "a named pipe or socket, not a file")
function M.unreadable(prog, what, path, err)
  local why = tostring(err or ""):match("^EIO: cannot read .-: (.*)$")
  return die(string.format("%s: cannot read the %s file %s%s", prog, what, path, why and (" (" .. why .. ")") or ""))
end

-- parse(prog, argv[, spec[, how]]) -> opts, or nil, message, exit code (0 after --help or
-- --completion). how: the script's own usage {usage, about, epilog, positional, llm_free}.
function M.parse(prog, argv, spec, how)
  spec = spec or options
  how = how or {}
  how.prog = prog
  local opts, err = args.parse(argv, spec, how)
  if not opts then return die(prog .. ": " .. err .. " (--help lists the options)") end
  if opts.help then print(args.usage(how, spec)); return nil, "help", 0 end
  if opts.completion then
    io.write(args.completion(how, spec, opts.completion))
    return nil, "completion", 0
  end
  if opts.config then
    local merged, why = require("agents.run.config").merge(opts, spec, how)
    if not merged then return die(prog .. ": " .. why) end
  end
  return opts
end

-- check_inputs(prog, opts, spec) -> true, or nil, message, exit code: the required options are
-- there and the files they name can be read and look like what they should be, before any work.
function M.check_inputs(prog, opts, spec)
  spec = spec or options
  if not opts.problem then
    return die(prog .. ": --problem is required (a KernelBench problem file; --help lists the options)")
  end
  local code, err = fs.read(opts.problem)
  if not code then return M.unreadable(prog, "problem", opts.problem, err) end
  for _, need in ipairs({ { "class%s+Model%W", "class Model" }, { "def%s+get_inputs%W", "def get_inputs" },
      { "def%s+get_init_inputs%W", "def get_init_inputs" } }) do
    if not code:find(need[1]) then
      return die(string.format("%s: the problem file %s has no %s (a KernelBench problem defines Model, "
        .. "get_inputs and get_init_inputs)", prog, opts.problem, need[2]))
    end
  end
  if spec.kernel and opts.kernel then
    local k, kerr = fs.read(opts.kernel)
    if not k then return M.unreadable(prog, "kernel", opts.kernel, kerr) end
    if not k:find("%S") then
      return die(prog .. ": the kernel file " .. opts.kernel .. " is empty (a kernel defines ModelNew or kernel_function)")
    end
  end
  return true
end

-- The GPUs this process may use, for a message: "... 0 = GPU 4 NVIDIA H100, 1 = GPU 5 ...; CUDA_VISIBLE_DEVICES=4,5"
local function allowed_text(have)
  local mask = os.getenv("CUDA_VISIBLE_DEVICES")
  local from = mask and ("; CUDA_VISIBLE_DEVICES=" .. mask) or ""
  if #have == 0 then
    return (mask and "CUDA_VISIBLE_DEVICES='" .. mask .. "' allows none" or "nvidia-smi lists none") .. "; use --devices cpu"
  end
  local items = {}
  for i, g in ipairs(have) do
    items[i] = string.format("%d = %s %s", i - 1, g.mig and g.uuid or ("GPU " .. g.index), tostring(g.name))
  end
  return "the GPUs this process may use: " .. table.concat(items, ", ") .. from
end

-- pool_devices(prog, opts) -> the pool's devices ("cpu", positions among the GPUs this process may
-- use, or nil: all of them, else CPU mode), or nil, message, exit code when --devices names a GPU
-- that is not there (or asks for all and there is none)
function M.pool_devices(prog, opts)
  if opts.devices == "cpu" or not opts.devices then return opts.devices end
  local have = require("kagent.gpu").gpus()
  local list = {}
  if opts.devices == "all" then
    if #have == 0 then return die(string.format("%s: --devices all: there is no GPU here (%s)", prog, allowed_text(have))) end
    for i = 1, #have do list[i] = i - 1 end
    return list
  end
  for d in opts.devices:gmatch("%d+") do
    d = tonumber(d)
    if d >= #have then
      return die(string.format("%s: --devices %s: there is no GPU %d here (%s)", prog, opts.devices, d, allowed_text(have)))
    end
    list[#list + 1] = d
  end
  return list
end

-- out_dir(prog, path, what) -> true, or nil, message, 2 (said on stderr): the folder results go to
-- (made where missing) takes a file now, so no work is done whose results could not be kept
function M.out_dir(prog, path, what)
  what = what or "--out"
  if fs.exists(path) and not fs.is_dir(path) then
    return die(string.format("%s: %s %s is not a folder", prog, what, path))
  end
  local ok, err = fs.mkdir_p(path)
  local probe = fs.join(path, string.format(".kagent-write-probe-%d", math.random(0, 0x7fffffff)))
  if ok then ok, err = fs.write(probe, "") end
  if not ok then
    return die(string.format("%s: %s %s cannot be written: %s", prog, what, path, tostring(err)))
  end
  fs.remove(probe)
  return true
end

-- write_probe(db) -> true, or nil and why: one row written and rolled back, so a read-only file
-- (which SQLite opens read-only without a word) is found now, not at the run's first record
local function write_probe(db)
  local ok, res, err = pcall(db.transaction, db, function(d)
    local changes, werr = d:exec("INSERT OR REPLACE INTO llm_cache(key, created) VALUES ('kagent:write-probe', 0)")
    error({ write_error = changes == nil and werr }, 0)  -- never kept: the transaction rolls back
  end)
  if ok then return nil, err end  -- BEGIN failed
  if type(res) == "table" and res.write_error == false then return true end
  return nil, type(res) == "table" and res.write_error or res
end

-- damage(db) -> nil, or what SQLite's own check found wrong with the database's pages. A damaged
-- page fails only the queries that touch it, so a run on it would go on with lessons, attempts
-- or the archive silently missing: it is checked before any work.
local function damage(db)
  local rows, err = db:query("PRAGMA quick_check(3)")
  if not rows then return tostring(err) end
  local found = {}
  for _, r in ipairs(rows) do
    local _, first = next(r)
    local v = r.quick_check or first
    if v ~= "ok" then found[#found + 1] = tostring(v) end
  end
  return #found > 0 and table.concat(found, "; ") or nil
end

-- open_memory(prog, path) -> db that can be written, or nil, message, exit code
function M.open_memory(prog, path)
  path = path or require("kagent.mem").default_path()
  local db, err = require("kagent.mem").open(path)
  if db then
    local bad = damage(db)
    if bad then
      db:close()
      return die(string.format("%s: the memory database %s is damaged (%s): restore it from a copy, or move it "
        .. "aside and start a new one (--db or KAGENT_DB)", prog, path, bad))
    end
    local ok, werr = write_probe(db)
    if ok then return db end
    db:close()
    err = werr
  end
  return die(string.format("%s: the memory database %s cannot be written: %s", prog, path, tostring(err)))
end

return M
