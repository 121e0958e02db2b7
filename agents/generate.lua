-- agents/generate.lua: a first correct kernel for a problem, from its PyTorch reference alone.
--   kagent-rt agents/generate.lua --problem P [--gen-workers 4] [--refine 3] [--dtype bf16]
-- Parallel LLM workers each write a kernel, verify it and refine it with the exact error; the
-- first verified one is timed against eager and torch.compile, written as best_kernel.py in a run
-- directory, and archived in memory, so `agents/beam.lua --problem P` (no --kernel) starts from it.
-- beam.lua runs the same generation itself when it has no kernel and nothing archived.

local json = require("kagent.json")
local llm = require("kagent.llm")
local ktime = require("kagent.time")
local prompt = require("kagent.prompt")
local options = require("agents.lib.options")
local run = require("agents.lib.run")
local generate = require("agents.lib.generate")

local PROG = "agents/generate.lua"
local SPEC = {}
for _, name in ipairs({ "problem", "gen-workers", "refine", "model", "dtype", "out", "db", "devices",
    "job-timeout", "max-tokens", "temperature", "budget-usd", "budget-tokens" }) do
  SPEC[name] = options[name]
end

local function main(argv)
  local opts, _, code = run.parse(PROG, argv, SPEC)
  if not opts then return code end
  if not opts.problem then
    io.stderr:write(PROG .. ": --problem is required\n" .. require("agents.lib.args").usage(PROG, SPEC) .. "\n")
    return 2
  end
  if opts.model then llm.configure({ model = opts.model }) end
  local configured, which = llm.configured()
  if not configured then
    io.stderr:write(PROG .. ": no LLM is configured, and generating a kernel needs one: " .. tostring(which)
      .. "\nTo improve an existing kernel without an LLM: kagent-rt agents/tune.lua --problem P --kernel K\n")
    return 2
  end
  opts.model = opts.model or which
  if opts.budget_usd or opts.budget_tokens then
    llm.configure({ budget = { max_usd = opts.budget_usd, max_tokens = opts.budget_tokens } })
  end
  local S, _, ecode = run.setup(PROG, opts, "generate", SPEC)
  if not S then return ecode end
  S.llm, S.llm_enabled = llm, true
  S.system_prompt = prompt.render("system", { language = S.can_profile and "Triton" or "PyTorch (CPU mode)",
    gpu_name = S.device_name })
  S.rd:write("problem.py", S.problem_code)

  local g, gerr = generate.run(S, opts.gen_workers)
  if not g then
    io.stderr:write(PROG .. ": " .. gerr .. "\n")
    S.mem:finish("failed", { error = gerr })
    return 1
  end
  -- time the winner next to both baselines in one job (same method for all three)
  local r = S.pool:evaluate(S.job(g.code, { bench = { baselines = { "eager", "compile" } } }))
  if not r.ok then r = g.result end
  S.rd:write("best_kernel.py", g.code)
  S.rd:write("best_eval.json", r)
  local k = { code = g.code, result = r }
  k.attempt_id = S.mem:add_attempt({ round = 0, role = "generate", strategy = "generate",
    source_path = S.rd:path("best_kernel.py"), source_hash = require("agents.lib.fingerprint").of(g.code),
    stage = "done", correct = true, time_ms = r.time_ms and r.time_ms.median,
    speedup_vs_eager = r.speedup_vs_eager, speedup_vs_compile = r.speedup_vs_compile })
  S.mem:archive(k, S.dtype)
  local t = r.time_ms and r.time_ms.median
  local u = S.usage
  local summary = { run_id = S.rd.id, mode = "generate", problem = S.problem_path, dtype = S.dtype,
    device = S.device_name, model = opts.model, verified = true, worker = g.worker, attempts = g.attempts,
    best_ms = t or json.null, baselines = { eager_ms = r.eager_ms or json.null, compile_ms = r.compile_ms or json.null },
    speedup_vs_eager = r.speedup_vs_eager or json.null, speedup_vs_compile = r.speedup_vs_compile or json.null,
    sol_pct = r.roofline and r.roofline.sol_pct or json.null, best = { path = "best_kernel.py" },
    tokens = { input = u.input_tokens, output = u.output_tokens, cache_read = u.cache_read_tokens,
      cache_write = u.cache_write_tokens, total = S.tokens() },
    llm_calls = u.calls, cost_usd = S.cost(), wall_s = ktime.now() - S.t0, memory_run_id = S.mem.run_id }
  S.rd:write("summary.json", summary)
  S.mem:finish("done", summary)
  S.progress:finish(string.format("run %s: generated a verified kernel (worker %d, %d attempt(s))%s\n  %s",
    S.rd.id, g.worker, g.attempts,
    t and string.format(": %.4f ms%s", t, r.eager_ms and string.format(", %.2fx eager", r.eager_ms / t) or "") or "",
    S.rd:path("best_kernel.py")))
  return 0
end

return main(kagent.args)
