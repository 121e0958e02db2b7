-- kagent.llm, the accounting: the run's usage totals (all calls and per model), what each call
-- costs (configured prices, else kagent/llm/prices.lua), and the budgets that stop new calls
-- once spent. llm.usage() reads these totals.
local log = require("kagent.log")
local config = require("kagent.llm.config")
local builtin_prices = require("kagent.llm.prices")

local M = {}

local cfg, env = config.cfg, config.env
local totals
local unpriced = {}  -- models warned about as having no price (once per run)

local function zero_usage()
  return { calls = 0, failures = 0, input_tokens = 0, output_tokens = 0, cache_read_tokens = 0,
           cache_write_tokens = 0, cost_usd = 0, http_requests = 0, retries = 0, replayed = 0,
           replay_misses = 0, unpriced_calls = 0,
           gen_tokens = 0, gen_seconds = 0, tokens_per_s = 0, failures_by_code = {} }
end

--- reset(): the totals start again from zero (llm.reset_usage).
function M.reset()
  totals = zero_usage()
  totals.by_model = {}
end
M.reset()

--- forget_unpriced(): a model without a price is warned about again (llm.configure{reset}).
function M.forget_unpriced() unpriced = {} end

--- add(field, n): adds n (default 1) to one of the run's counters (http_requests, retries, ...).
function M.add(field, n)
  totals[field] = totals[field] + (n or 1)
end

--- failed(code): counts a failed call, by its code.
function M.failed(code)
  totals.failures = totals.failures + 1
  totals.failures_by_code[code] = (totals.failures_by_code[code] or 0) + 1
end

local function price_for(model)
  local function find(tbl)
    if tbl[model] then return tbl[model] end
    local best, best_len = nil, 0
    for name, p in pairs(tbl) do
      if #name > best_len and model:sub(1, #name) == name then best, best_len = p, #name end
    end
    return best
  end
  return find(cfg.prices) or find(builtin_prices)
end

-- cost_of(r, usage) -> USD of a call, and whether the model has a price. A model without one adds 0 to the totals
-- and its call is counted in `unpriced_calls`, so a report can say its cost is unknown rather
-- than guess it (a model on a self-hosted server is not warned about).
function M.cost_of(r, u)
  local model = r.model
  local p = price_for(model)
  if not p then
    if not unpriced[model] and not r.compat then
      unpriced[model] = true
      log.warn("llm: no price for model %s; its cost is unknown (add it with llm.configure{prices=...})", model)
    end
    return 0, false
  end
  return ((u.input_tokens * (p.input or 0)) + (u.output_tokens * (p.output or 0))
    + (u.cache_read_tokens * (p.cache_read or 0)) + (u.cache_write_tokens * (p.cache_write or 0))) / 1e6, true
end

local TOKEN_FIELDS = { "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens" }

-- account(model, usage, cost, gen_tokens, gen_seconds, priced): adds a call to the run's and its
-- model's totals. gen_tokens over gen_seconds is the decoding rate of the calls that were timed
-- (replayed calls are not).
function M.account(model, u, cost, gen_tokens, gen_seconds, priced)
  local per = totals.by_model[model]
  if not per then
    per = zero_usage()
    totals.by_model[model] = per
  end
  for _, t in ipairs({ totals, per }) do
    t.calls = t.calls + 1
    if not priced then t.unpriced_calls = t.unpriced_calls + 1 end
    for _, k in ipairs(TOKEN_FIELDS) do t[k] = t[k] + u[k] end
    t.cost_usd = t.cost_usd + cost
    if gen_seconds then
      t.gen_tokens = t.gen_tokens + gen_tokens
      t.gen_seconds = t.gen_seconds + gen_seconds
      t.tokens_per_s = t.gen_seconds > 0 and t.gen_tokens / t.gen_seconds or 0
    end
  end
end

-- total_tokens(u) -> the tokens a usage table counts: input, output and cache reads and writes
-- (the one formula for budgets, summaries and reports).
function M.total_tokens(u)
  return (u.input_tokens or 0) + (u.output_tokens or 0) + (u.cache_read_tokens or 0) + (u.cache_write_tokens or 0)
end

-- budget_error() -> "EBUDGET: ..." once a budget (configure{budget}, else KAGENT_LLM_MAX_USD and
-- KAGENT_LLM_MAX_TOKENS) is spent, else nil.
function M.budget_error()
  local b = cfg.budget
  local max_usd = b.max_usd or tonumber(env("KAGENT_LLM_MAX_USD") or "")
  local max_tokens = b.max_tokens or tonumber(env("KAGENT_LLM_MAX_TOKENS") or "")
  if max_usd and totals.cost_usd >= max_usd then
    return string.format("EBUDGET: cost budget spent (%.4f of %.4f USD)", totals.cost_usd, max_usd)
  end
  local used = M.total_tokens(totals)
  if max_tokens and used >= max_tokens then
    return string.format("EBUDGET: token budget spent (%d of %d tokens)", used, max_tokens)
  end
end

-- A copy, one level of nested tables deep (by_model entries copied by the caller).
local function copy(t)
  local out = {}
  for k, v in pairs(t) do
    if type(v) == "table" then
      local c = {}
      for k2, v2 in pairs(v) do c[k2] = v2 end
      v = c
    end
    out[k] = v
  end
  return out
end

--- usage() -> run totals (a copy).
function M.usage()
  local out = copy(totals)
  out.by_model = {}
  for model, per in pairs(totals.by_model) do out.by_model[model] = copy(per) end
  return out
end

return M
