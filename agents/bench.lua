-- agents/bench.lua: a benchmark table of problems with an input and an optimized kernel.
--   kagent-rt agents/bench.lua DIR [DIR...] [--dtype bf16] [--json out.json] [--csv out.csv]
-- DIR: a problem folder in KernelAgent's artifact layout (problem.py, input_kernel.py,
-- optimized_kernel_beam_search.py) or a folder of them, a run folder or a folder of runs
-- (best_kernel.py is the optimized kernel), or a sweep folder. For each problem: eager,
-- torch.compile, torch.compile max-autotune, the input and the optimized kernel, all timed by the
-- evaluator's one method, with medians, spreads, speedups, speed-of-light % and the correctness
-- re-check of both kernels (agents/tools/bench/measure.lua). docs/reports.md has the details.
local fs = require("kagent.fs")
local json = require("kagent.json")
local task = require("kagent.task")
local run_lib = require("agents.run")
local targets = require("agents.tools.bench.targets")
local measure = require("agents.tools.bench.measure")
local output = require("agents.tools.bench.output")

local PROG = "agents/bench.lua"

local SPEC = {
  dtype = { type = "string", choices = { "fp32", "bf16", "fp16" }, help = "the problems' dtype (default: a run's own, else fp32)" },
  json = { type = "string", help = "write the rows as JSON: benchmark.py --json's keys and ours" },
  csv = { type = "string", help = "write the rows as CSV" },
  devices = { type = "string", help = "GPU indices \"0,1\" or \"cpu\" (default: all GPUs, else cpu); problems run one per GPU at once" },
  baselines = { type = "string", help = "baselines to time, comma-joined (default: every one the evaluator times; in CPU mode those that need no GPU)" },
  ["no-do-bench"] = { type = "boolean", default = false, help = "leave out triton.testing.do_bench means of the baselines (GPU)" },
  ["no-compare"] = { type = "boolean", default = false, help = "leave out the interleaved timing of input and optimized in one job (pool:compare)" },
  ["job-timeout"] = { type = "number", above = 0, default = 600, help = "seconds per evaluator stage" },
  resume = { type = "boolean", default = false, help = "keep the problems already in the --json file and measure the rest" },
  markdown = { type = "boolean", default = false, help = "print the tables as Markdown (the default where the output is not a terminal; on one, plain aligned columns)" },
}

local function fail(msg, code)
  io.stderr:write(PROG .. ": " .. msg .. "\n")
  return code or 2
end

local HOW = { usage = "kagent-rt agents/bench.lua DIR [DIR...] [options]",
  about = "A benchmark table of problems with an input and an optimized kernel: eager, torch.compile, max-autotune, "
    .. "the input and the optimized kernel timed by the evaluator's one method, with spreads, speedups, "
    .. "speed-of-light % and the correctness re-check.",
  epilog = "DIR: KernelAgent problem folders (problem.py, input_kernel.py, optimized_kernel_beam_search.py) or a folder "
    .. "of them, run folders or a folder of runs (best_kernel.py), or a sweep folder (sweep.json). Exit status: 0 done, "
    .. "1 a kernel failed its correctness re-check or the outputs could not be written, 2 bad input, 3 no evaluator "
    .. "worker started. Details: docs/reports.md",
  positional = "DIR" }

local function split(s)
  local out = {}
  for v in tostring(s):gmatch("[^,%s]+") do out[#out + 1] = v end
  return out
end

-- write_outputs(rows, opts, names) -> true, or nil and why: --json and --csv (with the columns of
-- the evaluator's baselines `names`), rewritten after each problem so a killed benchmark keeps
-- what it measured (and --resume goes on from it)
local function write_outputs(rows, opts, names)
  if opts.json then
    local ok, err = fs.write(opts.json, json.encode(output.json_rows(rows, names), { pretty = true }) .. "\n")
    if not ok then return nil, err end
  end
  if opts.csv then
    local ok, err = fs.write(opts.csv, output.csv_text(rows, names))
    if not ok then return nil, err end
  end
  return true
end

local function main(argv)
  local opts, _, pcode = run_lib.parse(PROG, argv, SPEC, HOW)
  if not opts then return pcode end
  if #opts._positional == 0 then return fail("give at least one folder (--help says which)") end
  if opts.resume and not opts.json then return fail("--resume needs --json (the file it continues)") end
  local list = {}
  for _, dir in ipairs(opts._positional) do
    local found, ferr = targets.find(dir)
    if not found then return fail(ferr) end
    for _, t in ipairs(found) do list[#list + 1] = t end
  end
  targets.distinct(list)

  -- the files the rows go to take them now: nothing is measured that could not be kept
  for _, k in ipairs({ "json", "csv" }) do
    local path = opts[k]
    if path then
      if fs.is_dir(path) then return fail("--" .. k .. " " .. path .. " is a folder") end
      local _, oerr = run_lib.out_dir(PROG, fs.dirname(fs.abspath(path)), "--" .. k .. "'s folder")
      if oerr then return 2 end
    end
  end

  local rows, done = {}, {}
  if opts.resume and fs.exists(opts.json) then
    local old = json.decode(fs.read(opts.json) or "")
    if type(old) ~= "table" then return fail("--resume: " .. opts.json .. " is not a JSON array of rows") end
    for _, r in ipairs(old) do
      if type(r) == "table" and type(r.spread) == "table" then
        rows[#rows + 1] = r
        done[r.problem] = true
      end
    end
  end

  local wanted_devs, _, dcode = run_lib.pool_devices(PROG, opts)
  if dcode then return dcode end
  local pool = require("kagent.gpu").pool({ devices = wanted_devs, timeout = math.max(900, 4 * opts.job_timeout) })
  local devs, derr = pool:devices()
  if not devs then return fail("no evaluator worker started: " .. tostring(derr), 3) end
  local cpu = devs[1].mode == "cpu"
  local device = cpu and "cpu" or (devs[1].gpu_name or ("cuda:" .. tostring(devs[1].device)))
  -- every baseline the evaluator times, from its ready line (job_defaults.BASELINES)
  local known, is_known = devs[1].baselines, {}
  for _, b in ipairs(known) do is_known[b] = true end
  local wanted = opts.baselines and split(opts.baselines) or known
  local baselines, skipped = {}, {}
  for _, b in ipairs(wanted) do
    if not is_known[b] then
      return fail("--baselines: unknown baseline " .. b .. " (" .. table.concat(known, ", ") .. ")")
    end
    if cpu and measure.GPU_ONLY[b] then skipped[b] = measure.GPU_ONLY[b] else baselines[#baselines + 1] = b end
  end
  if #baselines == 0 then baselines = json.empty_array end
  io.stderr:write(string.format("%s: %d problem(s) on %s%s\n", PROG, #list, device,
    cpu and " (CPU mode: pure-PyTorch kernels only, wall-clock timing, no roofline)" or ""))

  local todo = {}
  for _, t in ipairs(list) do
    if done[t.name] then io.stderr:write(string.format("  %s: kept from %s\n", t.name, opts.json))
    else todo[#todo + 1] = t end
  end
  -- one problem per device at a time: all of a problem's jobs on one worker, so its baselines
  -- are timed once and every figure of the problem shares the machine state
  local slots = {}
  for _, d in ipairs(devs) do slots[#slots + 1] = d.device end
  local fns, by_name, finished = {}, {}, 0
  for i, t in ipairs(todo) do
    fns[i] = function()
      local dev = table.remove(slots)
      local t0 = kagent.time.now()
      local dtype = opts.dtype or t.dtype or "fp32"
      local row = measure.measure(pool, t, { dtype = dtype, baselines = baselines, skipped = skipped,
        do_bench = not opts.no_do_bench and not cpu, device = dev, timeout = opts.job_timeout, compare = not opts.no_compare,
        cpu = cpu,
        on_step = function(what) io.stderr:write(string.format("  [%d/%d] %s: %s\n", i, #todo, t.name, what)) end })
      slots[#slots + 1] = dev
      by_name[t.name] = row
      finished = finished + 1
      local function ms(v) return type(v) == "number" and string.format("%.4f", v) or "-" end
      io.stderr:write(string.format("  [%d/%d] %s: optimized %s ms, input %s ms, eager %s ms (%.0f s; %d of %d done)\n", i,
        #todo, t.name, ms(row.optimized_ms), ms(row.input_kernel_ms), ms(row.eager_ms), kagent.time.now() - t0, finished, #todo))
      local keep = {}
      for _, r in ipairs(rows) do keep[#keep + 1] = r end
      for _, tt in ipairs(list) do if by_name[tt.name] then keep[#keep + 1] = by_name[tt.name] end end
      local ok, werr = write_outputs(keep, opts, known)
      if not ok then io.stderr:write(PROG .. ": cannot write the outputs: " .. tostring(werr) .. "\n") end
    end
  end
  task.all(fns, { limit = #devs })
  pool:close()

  -- rows in the order the problems were given, then rows of --resume's file for problems not
  -- given this time (so problems measured by separate commands gather in one file)
  local ordered, kept, listed = {}, {}, {}
  for _, r in ipairs(rows) do kept[r.problem] = r end
  for _, t in ipairs(list) do
    listed[t.name] = true
    ordered[#ordered + 1] = kept[t.name] or by_name[t.name]
  end
  for _, r in ipairs(rows) do if not listed[r.problem] then ordered[#ordered + 1] = r end end
  local ok, werr = write_outputs(ordered, opts, known)
  if not ok then return fail("cannot write the outputs: " .. tostring(werr), 1) end
  print(output.table_text(ordered, { dtype = opts.dtype or (list[1] and list[1].dtype) or "fp32", device = device,
    markdown = opts.markdown or not fs.isatty(1), baselines = known }))
  if opts.json then print("\nrows: " .. opts.json) end
  if opts.csv then print("csv: " .. opts.csv) end
  for _, r in ipairs(ordered) do
    if r.correct.optimized == false or r.correct.input_kernel == false then return 1 end
  end
  return 0
end

return main(kagent.args)
