-- agents/sweep.lua --pack DEST: the sweep as a small folder that travels (docs/agents.md): its
-- sweep.json and table.md, and for each finished problem its run's summary.json and best
-- kernel, at the same places (runs/<problem>/<run id>/). A sweep resumed from it (--resume DEST)
-- counts those problems finished and runs the rest; the run folders' other files (traces,
-- rounds, logs) stay behind.
local fs = require("kagent.fs")
local json = require("kagent.json")
local plan_lib = require("agents.tools.sweep.plan")
local task_lib = require("agents.tools.sweep.task")

local M = {}

M.KEEP = { "summary.json", "best_kernel.py" }

local function copy(from, to)
  local data, err = fs.read(from)
  if not data then return nil, string.format("cannot read %s: %s", from, tostring(err)) end
  fs.mkdir_p(fs.dirname(to))
  local ok, werr = fs.write(to, data)
  if not ok then return nil, string.format("cannot write %s: %s", to, tostring(werr)) end
  return #data
end

-- pack(plan, dest) -> {runs, bytes}, or nil, message. plan: the sweep with its results (report.write
-- wrote them); dest: a folder that does not exist or is empty.
function M.pack(plan, dest)
  if fs.abspath(dest) == plan.dir then return nil, "--pack " .. dest .. " is the sweep's own folder: give another" end
  if #(fs.list(dest) or {}) > 0 then return nil, "--pack " .. dest .. ": the folder is not empty (give a new one)" end
  local out = { runs = 0, bytes = 0 }
  for _, p in ipairs(plan.problems) do
    local done = task_lib.run_state(plan, p).done
    if done then
      local rel = fs.join("runs", p.name, fs.basename(done))
      for _, f in ipairs(M.KEEP) do
        if fs.exists(fs.join(done, f)) then
          local n, err = copy(fs.join(done, f), fs.join(dest, rel, f))
          if not n then return nil, err end
          out.bytes = out.bytes + n
        end
      end
      out.runs = out.runs + 1
    end
  end
  local saved = {}
  for k, v in pairs(plan) do saved[k] = v end
  saved.dir = fs.abspath(dest)
  local text = json.encode(saved, { pretty = true }) .. "\n"
  local ok, err = fs.write(plan_lib.path(dest), text)
  if not ok then return nil, "cannot write " .. plan_lib.path(dest) .. ": " .. tostring(err) end
  local n, terr = copy(fs.join(plan.dir, "table.md"), fs.join(dest, "table.md"))
  if not n then return nil, terr end
  out.bytes = out.bytes + #text + n
  return out
end

return M
