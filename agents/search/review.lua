-- The reviewer's verdicts on kernels and the inputs that broke them (--review, docs/agents.md
-- "The reviewer"). A reviewed kernel is run on the reviewer's proposals (agents/roles/reviewer.lua)
-- as extra trials of a verify job (the job option extra_trials, docs/lua-api.md): a kernel that
-- fails one is refused, and the input that broke it joins the problem's trials, in this run's
-- jobs and in later runs' on the same problem and dtype (memory database, table measurements,
-- kind "review_inputs"; run folder review/inputs.json). Those stored inputs go into every job,
-- whatever --review says: they are the problem's trials from then on.
--   final      the kernel about to be confirmed (each in turn, as the confirmation falls back)
--   finalists  also every finalist, before they are ranked
--   all        also every kernel when it is kept (enters the beam)
-- A kernel the reviewer refuses is never the run's result (fail closed): the confirmation moves
-- on to the next finalist. A proposal the evaluator refuses (outside its form or the problem's
-- contract) is the reply's failure, counted, never the kernel's.
local log = require("kagent.log")
local json = require("kagent.json")
local reviewer = require("agents.roles.reviewer")
local attempt = require("agents.search.attempt")
local review_inputs = require("agents.run.review_inputs")

local M = {}

M.MODES = { "off", "final", "finalists", "all" }
local RANK = { off = 0, final = 1, finalists = 2, all = 3 }
local state, store, stored_ids = review_inputs.state, review_inputs.store, review_inputs.stored_ids
M.inputs = review_inputs.inputs

-- on(run, stage) -> whether --review covers kernels at stage "final", "finalists" or "all"
function M.on(run, stage)
  return RANK[run.opts.review or "off"] >= RANK[stage]
end

-- culprit(run, k, proposals) -> the stored id of the proposal that alone fails the kernel, or nil.
-- A crash (ECUDA, ECRASH) ends the candidate's process and names no trial; the kernel passed its
-- regular trials before, so one of the proposals did it: each is run alone until one fails.
local function culprit(run, k, proposals)
  for _, q in ipairs(proposals) do
    local one = run.pool:verify(run.job(k.code, { extra_trials = { q } }))
    if not one.ok then return store(run, q) end
  end
end

-- review(run, k, stage) -> true, or false, why. A kernel is reviewed once per run (its verdict
-- kept by fingerprint); the reply's files and the verdict go to review/<n>_<kernel id>/.
local function review(run, k, stage)
  local s = state(run)
  local n = #s.reviews + 1
  local dir = string.format("review/%d_%s", n, tostring(k.id))
  local p = reviewer.propose(run, k)
  run.rd:write(dir .. "/prompt.txt", p.prompt)
  run.rd:write(dir .. "/reply.txt", p.reply)
  local proposals = p.proposals or {}
  local known = stored_ids(run)
  local extra = {}
  for _, q in ipairs(M.inputs(run)) do extra[#extra + 1] = q end
  for _, q in ipairs(proposals) do extra[#extra + 1] = q end
  local rec = { kernel = k.id, fingerprint = k.fingerprint, stage = stage, proposals = #proposals,
    reply_error = p.error or json.null, model = p.model or json.null }
  s.reviews[n] = rec
  s.proposals = s.proposals + #proposals
  if #extra == 0 then
    rec.ok, rec.note = true, "no input to run: " .. tostring(p.error or "the reply proposed none")
    run.rd:write(dir .. "/verdict.json", rec)
    return true
  end
  local r = run.pool:verify(run.job(k.code, { extra_trials = extra }))
  local v = type(r.review) == "table" and r.review or {}
  local refused = 0
  for _, x in ipairs(v.refused or {}) do if not known[x.id] then refused = refused + 1 end end
  s.refused_proposals = s.refused_proposals + refused
  rec.passed, rec.refused, rec.failed = v.passed or json.null, v.refused or json.null, v.failed or json.null
  rec.ok, rec.code, rec.error = r.ok == true, r.code or json.null, r.error or json.null
  if refused > 0 then
    log.warn("review of %s: %d of %d proposal(s) refused by the evaluator (the reply's failure)", tostring(k.id),
      refused, #proposals)
  end
  local why
  if not r.ok then
    -- fail closed: a kernel the review job cannot pass, for whatever reason, is not the result
    why = tostring(r.error)
    if r.code == "EREVIEW" and type(v.failed) == "table" and type(v.failed.proposal) == "table" then
      rec.input = store(run, v.failed.proposal)
    else
      rec.input = culprit(run, k, proposals)
    end
    log.warn("review of %s refused it: %s", tostring(k.id), why)
  end
  run.rd:write(dir .. "/verdict.json", rec)
  return r.ok == true, why
end

-- check(run, k, stage) -> true, or false, why: the kernel reviewed when --review covers stage
-- (once per run), else true
function M.check(run, k, stage)
  if not M.on(run, stage) then return true end
  local s = state(run)
  local fp = attempt.key(k)
  if not s.verdicts[fp] then
    local ok, why = review(run, k, stage)
    s.verdicts[fp] = { ok = ok, why = why }
  end
  return s.verdicts[fp].ok, s.verdicts[fp].why
end

-- finalists(run, finalists, tried) -> the finalists the reviewer did not refuse (with
-- --review finalists or all: the top --finalists are reviewed); each refused one is added to
-- tried as the confirmation's outcomes are
function M.finalists(run, finalists, tried)
  if not M.on(run, "finalists") then return finalists end
  local out = {}
  for i, k in ipairs(finalists) do
    local ok, why = true, nil
    if i <= (run.opts.finalists or 3) then ok, why = M.check(run, k, "finalists") end
    if ok then out[#out + 1] = k else tried[#tried + 1] = { id = k.id, ok = false, stage = "review", error = why } end
  end
  return out
end

-- kept(run, beam) -> the beam without the kernels the reviewer refuses (--review all); the beam
-- as it was when that would leave none (a refused kernel is a parent then, never the result)
function M.kept(run, beam)
  if not M.on(run, "all") then return beam end
  local out = {}
  for _, k in ipairs(beam) do
    if M.check(run, k, "all") then out[#out + 1] = k end
  end
  return #out > 0 and out or beam
end

-- summary(run) -> summary.json's `review`: the mode, each review (kernel, stage, proposals, verdict),
-- the proposals made and refused, and the stored inputs in the problem's trials
function M.summary(run)
  local s = state(run)
  local refused = {}
  for _, r in ipairs(s.reviews) do
    if not r.ok then refused[#refused + 1] = { kernel = r.kernel, input = r.input or json.null, error = r.error } end
  end
  return { mode = run.opts.review or "off", reviewed = #s.reviews, reviews = #s.reviews > 0 and s.reviews or json.empty_array,
    refused_kernels = #refused > 0 and refused or json.empty_array, proposals = s.proposals,
    refused_proposals = s.refused_proposals, inputs_added = s.added, inputs_in_trials = #M.inputs(run) }
end

return M
