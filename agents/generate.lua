-- agents/generate.lua: a first correct kernel for a problem, from its PyTorch reference alone.
--   kagent-rt agents/generate.lua --problem P [--gen-workers 4] [--refine 3] [--dtype bf16]
-- Parallel LLM workers each write a kernel, verify it and refine it with the exact error; the
-- first verified one is timed against eager and torch.compile, written as best_kernel.py in a run
-- directory, and archived in memory, so `agents/beam.lua --problem P` (no --kernel) starts from it.
-- beam.lua runs the same generation itself when it has no kernel and nothing archived.

local json = require("kagent.json")
local options = require("agents.run.options")
local run_lib = require("agents.run")
local startup = require("agents.search.startup")
local generate = require("agents.search.generate")
local confirm = require("agents.search.confirm")
local attempt = require("agents.search.attempt")
local verdict = require("agents.lib.verdict")
local summary = require("agents.search.summary")
local exit = require("agents.run.exit")

local PROG = "agents/generate.lua"
local SPEC = {}
for _, name in ipairs({ "problem", "language", "library", "gen-workers", "refine", "model", "prices", "dtype", "out", "db", "devices",
    "job-timeout", "max-spread", "metrics", "max-tokens", "max-reply-bytes", "max-code-bytes", "temperature", "budget-usd",
    "budget-tokens", "llm-timeout", "stream", "llm-failures", "llm-backoff" }) do
  SPEC[name] = options[name]
end
setmetatable(SPEC, getmetatable(options))

local HOW = {
  usage = "kagent-rt agents/generate.lua --problem P [options]",
  about = "A first correct kernel from the PyTorch problem alone: parallel LLM workers each write one (each told "
    .. "a different approach), verify it and refine it with the exact error; the first verified kernel is timed "
    .. "against eager and torch.compile, written as best_kernel.py and archived for agents/beam.lua.",
  epilog = "Exit status: 0 a kernel verified, 1 none did, 2 bad input, no LLM configured or the provider refused the key, "
    .. "3 the LLM stopped answering, 4 a strict replay met calls it had no answer for.",
}

local function main(argv)
  local run, code = startup.open(PROG, argv, { spec = SPEC, how = HOW, plan = function(opts)
    local llm, lcode = run_lib.require_llm(PROG, opts, "generating a kernel",
      "To improve an existing kernel without an LLM: kagent-rt agents/tune.lua --problem P --kernel K")
    if not llm then return nil, lcode end
    opts.policy = "generate"
    return { mode = "generate", llm = llm }
  end })
  if not run then return code end
  local opts = run.opts
  run.rd:write("problem.py", run.problem_code)

  local g, gerr, llm_down = generate.run(run, opts.gen_workers)
  if not g then
    io.stderr:write(PROG .. ": " .. gerr .. "\n")
    local s = summary.failed(run, gerr)
    if llm_down or run.llm_guard.down then
      return exit.llm_down_status(PROG, run.llm_guard.down and run.llm_guard or { down = "every worker ended on an LLM failure" })
    end
    return exit.replay_status(PROG, s, exit.EXIT.error)
  end
  -- the winner timed next to both baselines in one job (same method for all three)
  local r = confirm.with_baselines(run, g.code)
  local confirmed = verdict.verified(r)
  if not confirmed then r = g.result end
  run.rd:write("best_kernel.py", g.code)
  run.rd:write("best_eval.json", r)
  local k = attempt.kernel({ id = "generated", code = g.code, path = run.rd:path("best_kernel.py"), result = r })
  k.attempt_id = attempt.store_kernel(run.mem, k, "generate", "generate")
  if confirmed then run.mem:archive(k, run.dtype) end
  local t = r.time_ms.median
  local s = summary.base(run)
  s.verified, s.confirmed, s.worker, s.attempts = true, confirmed, g.worker, g.attempts
  s.granularity = g.granularity
  summary.add_library(s, r)
  s.best_ms = t
  summary.add_baselines(s, r, require("agents.lib.baselines").reported(run), t)
  s.sol_pct = r.roofline and r.roofline.sol_pct or json.null
  s.best = { path = "best_kernel.py" }
  run.rd:write("summary.json", s)
  run.mem:finish("done", s)
  -- no result without the files that hold it and the rows that record it (agents/run/writes.lua)
  if not summary.final_files_written(run, { "best_kernel.py", "summary.json" }) then
    summary.failed(run, require("agents.run.writes").failure(run))
    return exit.write_failed_status(PROG, run)
  end
  run.progress:finish(string.format("run %s: generated a verified kernel (worker %d, %d attempt(s)): %.4f ms%s\n  %s",
    run.rd.id, g.worker, g.attempts, t, r.eager_ms and string.format(", %.2fx eager", r.eager_ms / t) or "",
    run.rd:path("best_kernel.py") .. summary.library_line(s)))
  return exit.replay_status(PROG, s, exit.EXIT.done)
end

return main(kagent.args)
