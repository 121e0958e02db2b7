-- summary.json: what a run reports, written at its end by the search driver (and, for a
-- generation run, by agents/generate.lua): the confirmed result, its baselines and speedups,
-- the rounds, the outcomes of the attempts, usage and where the records are.
local json = require("kagent.json")
local ktime = require("kagent.time")
local fs = require("kagent.fs")
local log = require("kagent.log")
local proc = require("kagent.proc")
local calls = require("agents.run.calls")
local confirm = require("agents.search.confirm")
local review = require("agents.search.review")
local reply_stats = require("agents.run.reply_stats")
local models = require("agents.run.models")
local generality = require("agents.lib.generality")
local baselines = require("agents.lib.baselines")
local in_model = require("agents.lib.in_model")
local own_share = require("agents.lib.own_share")

local M = {}

-- replay(run) -> what the record/replay cache answered over the run's calls (all its processes)
function M.replay(run)
  return calls.replay(calls.read_csv(run.rd:path("usage.csv")), run.llm and run.llm.cache_mode() or "off")
end

-- base(run) -> the fields every summary.json has (run, status, problem, device, policy, usage,
-- LLM failures, replay, memory)
function M.base(run)
  local u = run.usage()
  return { run_id = run.rd.id, status = "done", mode = run.mode, problem = run.problem_path, dtype = run.dtype,
    shrunk = run.shrunk or json.null,  -- --shrink: {name = {from, to}}, the problem's sizes the run worked at
    tolerance = run.opts.tolerance or (run.job_defaults or {}).tolerance or json.null, device = run.device_name, model = run.model or json.null, policy = run.opts.policy,
    workers_per_gpu = run.devices and run.devices[1] and run.devices[1].workers or json.null,
    tokens = { input = u.input_tokens, output = u.output_tokens, cache_read = u.cache_read_tokens,
      cache_write = u.cache_write_tokens, total = u.tokens },
    llm_calls = u.calls, llm_failures = run.llm_guard:summary(), cost_usd = u.cost_usd,
    wall_s = ktime.now() - run.t0, memory_run_id = run.mem.run_id, replay = M.replay(run),
    replies = M.replies(run), models = M.models(run), review = review.summary(run),
    -- what the kernels were written in and the library policy their verdicts were judged under
    -- (--language, --library: agents/run/language.lua)
    language = run.opts.language or "triton", library = run.opts.library or "own" }
end

-- add_library(s, r): the own-kernel share of the GPU time and the library kernels by name of the
-- verdict r (the evaluator records them whatever the policy), or the reason it has no share
-- (own_share_unknown: CPU mode, no audit); nothing from a verdict of an evaluator without them
function M.add_library(s, r)
  if type(r) ~= "table" or (type(r.own_share) ~= "number" and type(r.own_share_unknown) ~= "string") then return end
  own_share.copy(s, r)
end

-- library_line(s) -> the last line's note of how much of the best's GPU time its own kernels
-- carry under the run's library policy, so a figure carried by cuBLAS is never taken for a
-- kernel's; "" where the verdict has no share (CPU mode, an evaluator without it)
function M.library_line(s)
  if type(s.own_share) ~= "number" then return "" end
  local names = own_share.names(s)
  local libs = names ~= "" and (": library kernels " .. names) or ""
  return string.format("\n  library policy %s: own kernels carry %.0f%% of the GPU time%s", tostring(s.library),
    100 * s.own_share, libs)
end

-- models(run, attempts, best_attempt_id) -> per model ("provider:model"): attempts, verified,
-- improved, share_improved, best (wrote the best kernel), calls, tokens, cost_usd (null: the
-- model has no price, the cost is unknown) (agents/run/models.lua). attempts: the search's
-- attempt summaries, each with the model that wrote it (none for a generation run).
function M.models(run, attempts, best_attempt_id)
  local usage = run.llm and run.llm.usage().by_model or {}
  local out = {}
  local known = { run.model }
  for _, m in ipairs(run.model_plan and run.model_plan.all or {}) do known[#known + 1] = m end
  for m, e in pairs(models.stats(attempts, usage, best_attempt_id, known)) do
    if not e.priced then e.cost_usd = json.null end
    e.priced = nil
    out[m] = e
  end
  return out
end

-- replies(run) -> the replies' quality per role and the directions' sources
-- (agents/run/reply_stats.lua), with the share above which the last line warns
function M.replies(run)
  local s = run.reply_stats and run.reply_stats:summary() or reply_stats.new():summary()
  s.totals.rules_share = s.totals.rules_share or json.null
  s.rules_warn = (run.opts.rules_warn or 100 * reply_stats.DEFAULT_WARN) / 100
  return s
end

-- rules_line(s) -> the last line's warning of a run mostly driven by rules, or ""
function M.rules_line(s)
  local r = s.replies
  if type(r) ~= "table" or type(r.totals) ~= "table" or type(r.totals.rules_share) ~= "number" then return "" end
  local w = reply_stats.warning(r, r.rules_warn)
  return w and ("\n  " .. w) or ""
end

-- failed(run, why): a run that ended before it had a result: summary.json says so (status
-- "failed", the reason) and so does its row in memory, so no run is left `running`.
function M.failed(run, why)
  local s = M.base(run)
  s.status, s.error = "failed", why
  run.rd:write("summary.json", s)
  run.mem:finish("failed", s)
  if fs.exists(run.rd:path("report.html")) then M.write_report(run, true) end  -- no longer "running"
  run.progress:finish()
  return s
end

-- add_baselines(s, figures, names, best_ms): a summary's s.baselines[<name>_ms] and
-- s.speedup_vs_<name> (null where not measured) for each baseline of names (the evaluator's
-- ready line's, agents/lib/baselines.lua), figures[<name>_ms] over the best's best_ms
function M.add_baselines(s, figures, names, best_ms)
  s.baselines = s.baselines or {}
  for _, b in ipairs(names) do
    local ms = figures[b .. "_ms"]
    s.baselines[b .. "_ms"], s["speedup_vs_" .. b] = ms or json.null, ms and ms / best_ms or json.null
  end
end

-- attempts_to_best(attempts, best) -> attempts made in the rounds up to and including the one
-- that found the best kernel (a round's workers run at once), 0 when the input stays best
function M.attempts_to_best(attempts, best)
  if not best.round or best.round == 0 then return 0 end
  local n = 0
  for _, a in ipairs(attempts) do if (a.round or 0) <= best.round then n = n + 1 end end
  return n
end

-- write_report(run, running): report.html of the run and the index of its folder of runs (only
-- the run's page while it runs: it shows the rounds so far and reloads itself). A report that
-- cannot be written is a warning: the run's results are in summary.json already.
function M.write_report(run, running)
  local ok, err = pcall(function()
    local report = require("agents.tools.report")
    local path, why = report.run_page(run.rd.dir)
    if path and not running then path, why = report.runs_index(fs.dirname(run.rd.dir)) end
    if not path then error(why, 0) end
  end)
  if not ok then
    -- a page the disk refused is a failed write of the run (agents/run/writes.lua); a page that
    -- could not be made is a warning: the run's results are in summary.json
    local path = tostring(err):match("^EIO: cannot write (.-): ")
    if path and run.rd.failed then run.rd:failed(path, err) else log.warn("report: %s", tostring(err)) end
  end
end

-- search(run, st, reason, fin) -> summary of a search: fin is confirm.final's answer. Writes
-- best_kernel.py, best_eval.json, summary.json and report.html; archives the best once confirmed.
function M.search(run, st, reason, fin)
  if not fin.confirmed then return M.unconfirmed(run, st, reason, fin) end
  local best, final = fin.kernel, fin.result
  run.rd:write("best_kernel.py", best.code)
  M.ka_names(run.rd)
  run.rd:write("best_eval.json", final)
  local t = final.time_ms
  -- every baseline the evaluator names: the final's figure, else the start's
  local figures = {}
  for _, b in ipairs(baselines.all(run)) do figures[b .. "_ms"] = final[b .. "_ms"] or st.baselines[b .. "_ms"] end
  local eager, comp = figures.eager_ms, figures.compile_ms
  local beam = {}
  for i, k in ipairs(st.beam) do beam[i] = { id = k.id, time_ms = k.result.time_ms.median, fingerprint = k.fingerprint, path = k.path } end
  local s = M.base(run)
  s.input_kernel = run.opts.kernel or st.input.label
  s.granularity = st.input.granularity  -- a generated seed's, as its reply stated it
  M.add_library(s, final)
  -- source: whether the final's baselines were measured, cached (agents/search/measured.lua),
  -- completed (cached, the missing ones measured) or measured again after a failed re-check;
  -- input_source: the same for the start's
  s.baselines = { times = final.baseline_times or json.null,
    source = final.baselines_source or json.null, recheck = final.baselines_recheck or json.null,
    input_source = st.input.result and st.input.result.baselines_source or json.null }
  s.input_ms, s.best_ms, s.best_time = fin.input_ms, t.median, t
  -- the input's re-timing beside the best (the report's "Input vs best": one method, one moment)
  s.input_time = fin.input_time or json.null
  -- the best's figure during the search (the status line's), before the confirmation re-measured it
  local search_ms = best.result and best.result.time_ms and best.result.time_ms.median
  s.search_best_ms = search_ms or json.null
  s.best = { id = best.id, round = best.round, worker = best.worker or json.null, fingerprint = best.fingerprint, path = "best_kernel.py" }
  s.speedup_vs_input = fin.input_ms / t.median
  M.add_baselines(s, figures, baselines.all(run), t.median)
  -- what the confirmation checked: the fresh re-measure (trust), the resized problem, the sanitizer
  s.trust, s.generalizes = final.trust or json.null, final.generalizes or json.null
  -- where it does not: the resized problems it failed at and why (agents/lib/generality.lua
  -- words them); preferred_general: a finalist within noise chosen for generalizing
  s.generalization = final.generalizes == "no" and final.generalization or nil
  s.preferred_general = fin.preferred
  s.sanitizer = final.sanitizer and final.sanitizer.ok or json.null
  -- "cached": the sanitizer's and the resized problem's verdicts came from an earlier
  -- confirmation of the same kernel in the same environment; the figure was measured now
  s.confirmation_verdicts = final.verdicts_source or "measured"
  -- the best's verdict at KernelBench's tolerances (strict today, v0.1) and its largest errors
  s.kernelbench, s.max_abs_err, s.max_rel_err = final.kernelbench or json.null,
    final.max_abs_err or json.null, final.max_rel_err or json.null
  s.sol_pct = (final.roofline and final.roofline.sol_pct) or best.sol_pct or json.null
  s.verified, s.confirmation, s.beam = true, fin.tried, beam
  -- --objective in-model: the figures above are the model's with the kernel in it; the kernel's
  -- own beside them (agents/lib/in_model.lua)
  if final.in_model then s.objective, s.in_model, s.kernel_alone = "in-model", final.in_model, final.kernel end
  M.add_search_counts(s, run, st, reason)
  M.add_time_split(s, st, fin)
  s.models = M.models(run, st.attempts, best.attempt_id)
  s.attempts_to_best, s.rounds_to_best = M.attempts_to_best(st.attempts, best), best.round or 0
  run.rd:write("summary.json", s)
  M.write_report(run)
  run.mem:archive({ code = best.code, result = final, attempt_id = best.attempt_id }, run.dtype)
  run.mem:finish("done", s)
  -- never "confirmed best" without the files that hold it: the caller ends the run (exit 6)
  if not M.final_files_written(run, { "best_kernel.py", "summary.json" }) then return s end
  local shapes = generality.of_summary(s)
  run.progress:finish(string.format("run %s: confirmed best %.4f ms (%.2fx input%s%s)%s after %d round(s): %s\n  %s\n  %s",
    run.rd.id, t.median, s.speedup_vs_input,
    eager and string.format(", %.2fx eager", eager / t.median) or "",
    comp and string.format(", %.2fx torch.compile", comp / t.median) or "", shapes and (", " .. shapes .. ",") or "",
    st.round, s.stop_reason,
    M.figures_line(search_ms, t.median, final.trust, t) .. (final.in_model and ("\n  ranked by the model: "
      .. in_model.text(final)) or ""), run.rd.dir .. M.replay_line(s) .. M.time_line(s)
    .. M.rules_line(s) .. M.shapes_line(s) .. M.library_line(s)))
  return s
end

-- shapes_line(s) -> the last line's note of a best that works only at the problem's shapes, with
-- the evaluator's reason, or of a finalist chosen over a faster one for generalizing; or ""
function M.shapes_line(s)
  local long = generality.of_summary(s, true)
  if long then
    return "\n  " .. long .. "; in a model whose batch size changes it fails or returns wrong results "
      .. "(--require-generalize refuses such a kernel)"
  end
  local p = s.preferred_general
  return type(p) == "table" and ("\n  chosen over " .. tostring(p.over) .. ": " .. tostring(p.reason)) or ""
end

-- final_files_written(run, names) -> true where every write of the run held and each of the
-- run folder's files `names` is there (agents/run/writes.lua records what is not)
function M.final_files_written(run, names)
  local w = run.rd.writes
  if not w then return true end
  for _, name in ipairs(names) do w:written(run.rd:path(name)) end
  return w.first == nil
end

-- figures_line(search_ms, confirmed_ms, trust, confirmed_time) -> the line under the last one that
-- says which figure is the result and why it may differ from the best figure the status line
-- showed. The result is timed as the baselines are (the same rotated input sets, one method for
-- every "x eager"), in a fresh job; the evaluator's fresh-process re-measure with new input
-- values before every call confirms it. Only where the first timing raised a flag is the
-- re-measure's figure the result (confirmed_time.hardened): the line then says its speedups
-- compare it with baselines timed on rotated inputs (src/gpu/eval/README.md, "Fail closed").
function M.figures_line(search_ms, confirmed_ms, trust, confirmed_time)
  local fresh = type(trust) == "table" and trust.remeasured == true
  local hardened = type(confirmed_time) == "table" and confirmed_time.hardened == true
  local how = hardened and "a fresh process with new input values before every call, as the first timing raised a "
      .. "flag; the baselines were timed on rotated inputs"
    or fresh and "a fresh job beside the baselines, timed as they were, and confirmed by a fresh process with new "
      .. "input values before every call"
    or "a fresh job next to the baselines"
  if not search_ms then return "confirmed by " .. how .. "; the speedups use it" end
  local ratio = confirmed_ms / search_ms
  if ratio > 0.95 and ratio < 1.05 then
    return string.format("the search measured %.4f ms; the confirmation (%s) agrees", search_ms, how)
  end
  return string.format("the search measured %.4f ms (%.2fx %s) in a warm worker; the result is the "
    .. "confirmation's figure (%s), and the speedups use it", search_ms,
    ratio > 1 and ratio or 1 / ratio, ratio > 1 and "faster than the confirmed figure" or "slower than the confirmed figure", how)
end

-- add_time_split(s, st, fin): where the problem's wall time went — baselines_s (the start: the
-- input kernel timed beside the baselines), search_s (the rounds, summed over resumed processes),
-- confirm_s (the final confirmation) — and the confirmation's phases (agents/search/confirm.lua)
function M.add_time_split(s, st, fin)
  local t = st.timing or {}
  s.time_split = { baselines_s = t.baselines_s or json.null, search_s = t.search_s or json.null,
    confirm_s = t.confirm_s or json.null }
  s.confirm_phases = fin.phases or json.null
end

-- time_line(s) -> the run's last line's note of where its time went
function M.time_line(s)
  local t = s.time_split or {}
  local function sec(v) return type(v) == "number" and string.format("%.0f s", v) or "-" end
  local src = s.baselines and s.baselines.source
  return string.format("\n  time: baselines %s%s, search %s, confirmation %s", sec(t.baselines_s),
    type(src) == "string" and (" (final's " .. src .. ")") or "", sec(t.search_s), sec(t.confirm_s))
end

-- ka_names(rd): KernelAgent's name of the result beside ours, as a link (one file), so its
-- scripts (benchmark.py: problem.py, input_kernel.py, optimized_kernel_beam_search.py) read a run
-- folder as one of its problem folders.
function M.ka_names(rd)
  local res = proc.run({ "ln", "-sfn", "best_kernel.py", rd:path("optimized_kernel_beam_search.py") }, { timeout = 10 })
  if not (res and res.code == 0) then
    local why = res and res.stderr:match("[^\n]+") or "ln did not run"
    if rd.failed then rd:failed(rd:path("optimized_kernel_beam_search.py"), why)
    else log.warn("run folder: no optimized_kernel_beam_search.py link: %s", why) end
  end
end

-- add_search_counts(s, run, st, reason): rounds, stop reason and the attempts' outcomes
function M.add_search_counts(s, run, st, reason)
  local outcomes = {}
  for _, a in ipairs(st.attempts) do outcomes[a.outcome or "?"] = (outcomes[a.outcome or "?"] or 0) + 1 end
  s.rounds, s.rounds_requested, s.stop_reason = st.round, run.opts.rounds, reason or "rounds done"
  s.attempts, s.outcomes = #st.attempts, outcomes
  s.models = M.models(run, st.attempts, nil)
end

-- replay_line(s) -> the last line's note of what a record/replay cache answered, or ""
function M.replay_line(s)
  return s.replay.mode ~= "off" and string.format("\n  LLM replay: %d hit(s), %d miss(es) of %d call(s)",
    s.replay.hits, s.replay.misses, s.replay.calls) or ""
end

-- unconfirmed(run, st, reason, fin) -> summary of a search none of whose finalists passed the
-- final confirmation: status "unconfirmed", no best, no figure and no speedup anywhere (a figure
-- that was not confirmed is not a result), the finalists' confirmation outcomes, and nothing
-- archived. Their kernels stay in the rounds' folders.
function M.unconfirmed(run, st, reason, fin)
  local s = M.base(run)
  s.status, s.verified = "unconfirmed", false
  s.input_kernel = run.opts.kernel or st.input.label
  s.granularity = st.input.granularity
  s.confirmation = fin.tried
  s.not_measured = fin.not_measured or nil  -- a finalist the machine left unmeasured (exit 7)
  s.error = confirm.unconfirmed_line(fin.tried, fin.not_measured)
  M.add_search_counts(s, run, st, reason)
  M.add_time_split(s, st, fin)
  run.rd:write("summary.json", s)
  M.write_report(run)
  run.mem:finish("unconfirmed", s)
  run.progress:finish(string.format("run %s: %s\n  %s", run.rd.id, s.error, run.rd.dir .. M.replay_line(s)
    .. M.time_line(s) .. M.rules_line(s)))
  return s
end

return M
