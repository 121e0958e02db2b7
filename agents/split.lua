-- agents/split.lua: the LLM-free decomposition of many problems into subgraphs, each checked.
-- The splitter (agents/flows/splitter.lua) over many problems, each plan checked against its
-- traced model as agents/fuse.lua checks an LLM's.
--   kagent-rt agents/split.lua --problems DIR|LIST [--problems ...] [--shrink] [--devices cpu]
--       [--out DIR] [--job-timeout 600]
-- Writes split.json (a row per problem: subgraphs, valid or the reasons, the sizes it was traced
-- at) and table.md. No LLM, no kernel: it answers how many problems decompose, fast, on CPU.
local fs = require("kagent.fs")
local keys_lib = require("agents.lib.keys")
local json = require("kagent.json")
local ktime = require("kagent.time")
local task = require("kagent.task")
local run_lib = require("agents.run")
local plan_lib = require("agents.tools.sweep.plan")
local splitter = require("agents.flows.splitter")

local PROG = "agents/split.lua"
local SPEC = {
  problems = { type = "string", help = "a folder (its *.py), a list file, or .py paths (comma-joined); more as free arguments" },
  shrink = { type = "boolean", default = false, help = "trace each model at small sizes (its batch and extents lowered) where it runs there" },
  devices = { type = "string", default = "cpu", help = "\"cpu\", or GPUs as agents/sweep.lua takes them" },
  dtype = { type = "string", choices = { "fp32", "bf16", "fp16" }, default = "fp32", help = "dtype of the traced run" },
  out = { type = "string", help = "folder for split.json and table.md (default runs/split_<UTC time>)" },
  ["job-timeout"] = { type = "number", above = 0, default = 600, help = "seconds one problem's analysis may take" },
}
local HOW = { usage = "kagent-rt agents/split.lua --problems DIR|LIST [options]",
  about = "The LLM-free decomposition of agents/fuse.lua over many problems: each model traced, cut by the "
    .. "splitter's rule and the plan checked against the trace as an LLM's decomposition is checked.",
  epilog = "Exit status: 0 the table was written (whatever it says), 2 bad input. docs/sweeps.md describes it.",
  llm_free = true, positional = "more problem folders, lists or files" }

local function cell(s) return (tostring(s):gsub("|", "\\|"):gsub("\n", " ")) end

-- row(pool, path, opts) -> the problem's row
local function row(pool, path, opts)
  local level = fs.basename(fs.dirname(path))
  local r = { problem = fs.basename(path), level = level, path = path }
  local a = pool:analyze({ kind = "problem", problem = path, dtype = opts.dtype, shrink = opts.shrink or nil,
    timeout = opts.job_timeout })
  r.shrunk = a.shrunk or json.null
  if not a.ok then
    r.valid, r.stage, r.reason = false, "analysis", tostring(a.error)
  else
    r.ops = #(a.ops or {})
    local dec, why = splitter.decompose(a)
    if dec then
      r.valid, r.subgraphs = true, #dec.subgraphs
      local names = {}
      for i, s in ipairs(dec.subgraphs) do names[i] = s.name end
      r.names = names
    else
      r.valid = false
      r.stage = a.decomposable and "validation" or (a.traced and "trace (no functional form)" or "trace")
      r.reason = table.concat(why, "; ")
    end
  end
  -- the analysis's own time (the jobs of a split wait in the pool's queue)
  r.wall_s = tonumber(a.elapsed) or 0
  return r
end

local function table_md(rows, meta)
  local out = { "| level | problem | ops | subgraphs | valid | reason | traced at | analysis s |",
    "|---|---|---|---|---|---|---|---|" }
  for _, r in ipairs(rows) do
    local sizes = {}
    if type(r.shrunk) == "table" then
      for k, v in pairs(r.shrunk) do sizes[#sizes + 1] = string.format("%s %s→%s", k, v[1], v[2]) end
      table.sort(sizes)
    end
    out[#out + 1] = string.format("| %s | %s | %s | %s | %s | %s | %s | %.1f |", r.level, cell(r.problem),
      tostring(r.ops or "-"), tostring(r.subgraphs or "-"), r.valid and "yes" or "no",
      r.valid and "" or cell((r.stage or "") .. ": " .. tostring(r.reason):sub(1, 200)),
      #sizes > 0 and table.concat(sizes, ", ") or "as given", r.wall_s)
  end
  out[#out + 1] = ""
  for _, l in ipairs(meta.totals) do out[#out + 1] = l end
  return table.concat(out, "\n") .. "\n"
end

local function main(argv)
  local opts, _, code = run_lib.parse(PROG, argv, SPEC, HOW)
  if not opts then return code end
  local specs = { opts.problems }
  for _, p in ipairs(opts._positional or {}) do specs[#specs + 1] = p end
  if #specs == 0 then
    io.stderr:write(PROG .. ": --problems is required\n")
    return 2
  end
  local paths = {}
  for _, spec in ipairs(specs) do
    local ps, err = plan_lib.problem_paths(spec)
    if not ps then io.stderr:write(PROG .. ": " .. err .. "\n"); return 2 end
    for _, p in ipairs(ps) do paths[#paths + 1] = p end
  end
  local devices, derr, dcode = run_lib.pool_devices(PROG, opts)
  if derr then return dcode end  -- pool_devices said why
  local out = opts.out or fs.join("runs", "split_" .. os.date("!%Y%m%dT%H%M%SZ"))
  local _, oerr, ocode = run_lib.out_dir(PROG, out)
  if oerr then return ocode end
  local pool = require("kagent.gpu").pool({ devices = devices, timeout = opts.job_timeout + 60 })
  local devs = pool:devices()
  local t0 = ktime.now()
  local fns = {}
  for i, p in ipairs(paths) do
    fns[i] = function()
      local r = row(pool, p, opts)
      io.stderr:write(string.format("%s/%s: %s%s (%.1f s)\n", r.level, r.problem,
        r.valid and ("valid, " .. r.subgraphs .. " subgraphs") or "refused", r.valid and "" or (": " .. tostring(r.reason):sub(1, 160)), r.wall_s))
      return r
    end
  end
  local rows = {}
  for i, res in ipairs(task.all(fns)) do
    rows[i] = res.ok and res[1] or { problem = fs.basename(paths[i]), level = fs.basename(fs.dirname(paths[i])),
      valid = false, stage = "driver", reason = tostring(res[1]), wall_s = 0 }
  end
  pool:close()
  local by_level, totals = {}, {}
  for _, r in ipairs(rows) do
    local l = by_level[r.level] or { n = 0, valid = 0 }
    by_level[r.level] = l
    l.n, l.valid = l.n + 1, l.valid + (r.valid and 1 or 0)
  end
  for _, k in ipairs(keys_lib.sorted(by_level)) do
    totals[#totals + 1] = string.format("%s: %d of %d decompose validly", k, by_level[k].valid, by_level[k].n)
  end
  local d1 = devs and devs[1] or {}
  local meta = { created = os.date("!%Y-%m-%dT%H:%M:%SZ"), device = d1.mode == "cpu" and "cpu" or d1.gpu_name,
    torch = d1.torch, shrink = opts.shrink, dtype = opts.dtype, rule = splitter.RULE, wall_s = ktime.now() - t0,
    totals = totals, by_level = by_level }
  local ok, werr = fs.write(fs.join(out, "split.json"), json.encode({ meta = meta, rows = rows }, { pretty = true }) .. "\n")
  if ok then ok, werr = fs.write(fs.join(out, "table.md"), table_md(rows, meta)) end
  if not ok then
    io.stderr:write(string.format("%s: the results could not be written to %s: %s\n", PROG, out, tostring(werr)))
    return 1
  end
  io.stdout:write(table.concat(totals, "\n") .. "\n" .. fs.join(out, "table.md") .. "\n")
  return 0
end

return main(kagent.args)
