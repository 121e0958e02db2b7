-- agents/report.lua: (re)builds the HTML reports of existing folders.
--   kagent-rt agents/report.lua DIR [DIR...]
-- DIR may be a run folder (report.html, and index.html of the folder it is in), a folder of runs
-- such as runs/ (every run's report.html and the folder's index.html), or a sweep folder
-- (every run's report.html and the sweep's index.html). Pages are self-contained: they open
-- from disk with no network. docs/reports.md describes them.
local fs = require("kagent.fs")
local run_lib = require("agents.run")
local report = require("agents.tools.report")

local PROG = "agents/report.lua"
local SPEC = {}
local HOW = { usage = "kagent-rt agents/report.lua DIR [DIR...]",
  about = "(Re)builds the HTML reports of existing folders: report.html in each run folder, index.html in folders "
    .. "of runs and sweeps. Pages are self-contained and open from disk with no network.",
  epilog = "DIR: a run folder, a folder of runs (runs/), or a sweep folder (sweep.json). Exit status: 0 done, "
    .. "1 a page could not be written, 2 a DIR that is missing or none of these (the others are still done). "
    .. "Details: docs/reports.md",
  positional = "DIR" }

-- a finished run (summary.json) or one still running (state.json: its page so far)
local function is_run(dir) return fs.exists(fs.join(dir, "summary.json")) or fs.exists(fs.join(dir, "state.json")) end

-- run_dirs(folder) -> run folders directly under folder
local function run_dirs(folder)
  local out = {}
  for _, name in ipairs(fs.list(folder) or {}) do
    local d = fs.join(folder, name)
    if fs.is_dir(d) and is_run(d) then out[#out + 1] = d end
  end
  return out
end

local failures, bad_input = 0, 0
local function refused(why, dir)
  bad_input = bad_input + 1
  io.stderr:write(PROG .. ": " .. dir .. ": " .. why .. "\n")
end

local function done(path, err, what)
  if path then print(path) else
    failures = failures + 1
    io.stderr:write(PROG .. ": " .. what .. ": " .. tostring(err) .. "\n")
  end
end

local function runs_folder(folder)
  for _, d in ipairs(run_dirs(folder)) do
    local path, err = report.run_page(d)
    done(path, err, d)
  end
  local path, err = report.runs_index(folder)
  done(path, err, folder)
end

local function main(argv)
  local opts, _, pcode = run_lib.parse(PROG, argv, SPEC, HOW)
  if not opts then return pcode end
  if #opts._positional == 0 then
    io.stderr:write(PROG .. ": give at least one folder (--help says which)\n")
    return 2
  end
  -- why(err, dir) -> err without the folder's name in front (refused() names it)
  local function why(err, dir) return (tostring(err):gsub("^" .. dir:gsub("%p", "%%%0") .. "/?", "")) end
  local function one(dir)
    if not fs.is_dir(dir) then
      refused(fs.exists(dir) and "not a folder" or "no such folder", dir)
    elseif is_run(dir) then
      local path, perr = report.run_page(dir)
      if not path then return refused(why(perr, dir), dir) end
      done(path, perr, dir)
      local parent = fs.dirname(fs.abspath(dir))
      local ipath, ierr = report.runs_index(parent)
      done(ipath, ierr, parent)
    elseif fs.exists(fs.join(dir, "sweep.json")) then
      for _, name in ipairs(fs.list(fs.join(dir, "runs")) or {}) do runs_folder(fs.join(dir, "runs", name)) end
      local path, perr = report.sweep_index(dir)
      if not path and not tostring(perr):find("EIO", 1, true) then return refused(why(perr, dir), dir) end
      done(path, perr, dir)
    elseif #run_dirs(dir) > 0 then
      runs_folder(dir)
    else
      refused("neither a run folder (summary.json), a folder of runs nor a sweep folder (sweep.json)", dir)
    end
  end
  for _, dir in ipairs(opts._positional) do
    -- a record of another shape than the pages read is bad input, said in one line
    local ok, err = pcall(one, dir)
    if not ok then refused("cannot be read as a run or a sweep: " .. tostring(err):match("^[^\n]*"), dir) end
  end
  -- the folders it could read are done either way; a folder it was wrongly given is bad input
  if bad_input > 0 then return 2 end
  return failures == 0 and 0 or 1
end

return main(kagent.args)
