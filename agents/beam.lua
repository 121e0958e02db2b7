-- agents/beam.lua: hardware-guided beam search (the KernelAgent optimization loop, DESIGN §7).
--   kagent-rt agents/beam.lua --problem P [--kernel K] [--rounds 8] [--beam 2] [--directions 2] ...
-- Each round: per distinct parent profile once -> diagnose M bottlenecks in one call -> M workers
-- (optimize -> verify/refine -> benchmark -> profile -> reflect) -> keep the N best distinct.

local llm = require("kagent.llm")
local log = require("kagent.log")
local prompt = require("kagent.prompt")
local run = require("agents.lib.run")
local select = require("agents.lib.select")
local manager = require("agents.roles.manager")

local function load_strategy(name)
  if name:find("/") or name:match("%.lua$") then return dofile(name) end
  return require("agents.lib." .. name)
end

local function main(argv)
  local opts, msg, code = run.parse("agents/beam.lua", argv)
  if not opts then return code end

  if opts.model then llm.configure({ model = opts.model }) end
  local configured, which = llm.configured()
  if not configured or opts.tuner then
    if not configured then
      io.stderr:write("beam.lua: no LLM is configured (" .. tostring(which) .. ").\n"
        .. "Falling back to the LLM-free tuner (agents/tune.lua): same run directory and memory records.\n")
    end
    return require("agents.lib.tuner").main(opts)
  end
  opts.model = opts.model or which
  -- the LLM layer also enforces the budget, so a round in flight cannot overspend by much
  if opts.budget_usd or opts.budget_tokens then
    llm.configure({ budget = { max_usd = opts.budget_usd, max_tokens = opts.budget_tokens } })
  end

  local S, err, ecode = run.setup("agents/beam.lua", opts, "llm")
  if not S then return ecode end
  S.llm, S.llm_enabled = llm, true
  S.strategy = load_strategy(opts.policy or "beam")
  S.system_prompt = prompt.render("system", { language = S.can_profile and "Triton" or "PyTorch (CPU mode)",
    gpu_name = S.device_name })
  S.progress.usage = nil
  local input, ierr = run.input(S)
  if not input then io.stderr:write("beam.lua: " .. ierr .. "\n"); return 2 end

  local first = S.state and (S.state.round + 1) or 1
  S.rounds_without_gain = S.state and S.state.rounds_without_gain or 0
  local reason = S.state and S.state.stop_reason
  local done = first - 1
  local stop_opts = { sol_stop = opts.sol_stop, plateau = opts.plateau, budget_usd = opts.budget_usd,
    budget_tokens = opts.budget_tokens }
  reason = reason or select.should_stop({ best = S.best, rounds_without_gain = S.rounds_without_gain,
    cost_usd = S.cost(), tokens = S.tokens() }, stop_opts)
  for round = first, opts.rounds do
    if reason then break end
    local t0 = require("kagent.time").now()
    local children = manager.run_round(S, S.beam, round)
    S.beam = S.strategy.keep(S.beam, children, opts)
    if run.update_best(S, S.beam) then S.rounds_without_gain = 0 else S.rounds_without_gain = S.rounds_without_gain + 1 end
    done = round
    S.rd:write(string.format("rounds/round_%d/round.json", round), {
      round = round, wall_s = require("kagent.time").now() - t0, children = #children,
      beam = (function() local b = {} for i, k in ipairs(S.beam) do b[i] = { id = k.id, time_ms = k.result.time_ms.median, fingerprint = k.fingerprint } end return b end)(),
      best = S.best.id, tokens = S.tokens(), cost_usd = S.cost() })
    reason = select.should_stop({ best = S.best, rounds_without_gain = S.rounds_without_gain,
      cost_usd = S.cost(), tokens = S.tokens() }, stop_opts)
    S.stop_reason = reason
    run.save_state(S, round)
  end
  run.finish(S, done, reason)
  return 0
end

return main(kagent.args)
