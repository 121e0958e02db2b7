-- The run context shared by roles: LLM access with accounting, template rendering, evaluation
-- jobs, and text helpers. Roles receive it instead of reaching for globals, so a test can hand
-- them a context with a fake pool or a fake LLM (named as such in the test).
local json = require("kagent.json")
local prompt = require("kagent.prompt")
local log = require("kagent.log")

local M = {}

function M.entry_point(code)
  code = code or ""
  if code:find("class%s+ModelNew") then return "`class ModelNew(nn.Module)`" end
  if code:find("def%s+kernel_function") then return "`def kernel_function(...)`" end
  return "`class ModelNew(nn.Module)`"
end

local function fmt_ms(v) return v and string.format("%.4f ms", v) or "-" end

function M.timing_text(r)
  r = r or {}
  local t = r.time_ms
  local parts = {}
  if type(t) == "table" and t.median then
    parts[#parts + 1] = string.format("median %.4f ms (p10 %s, p90 %s, n=%s)", t.median, fmt_ms(t.p10), fmt_ms(t.p90), tostring(t.n or "?"))
  end
  if r.eager_ms then parts[#parts + 1] = "eager " .. fmt_ms(r.eager_ms) end
  if r.compile_ms then parts[#parts + 1] = "torch.compile " .. fmt_ms(r.compile_ms) end
  return #parts > 0 and table.concat(parts, "; ") or "not timed"
end

-- new{opts, pool, llm, rd, mem, skills, problem_path, problem_code, progress} -> ctx
function M.new(c)
  local ctx = c
  ctx.dtype = c.opts.dtype or "fp32"
  ctx.usage = { calls = 0, input_tokens = 0, output_tokens = 0, cache_read_tokens = 0, cache_write_tokens = 0, cost_usd = 0 }
  ctx.usage_base = c.usage_base or { tokens = 0, cost_usd = 0 }
  ctx.entry_point = M.entry_point
  ctx.timing_text = M.timing_text
  ctx.system_prompt = nil

  function ctx.render(name, vars)
    local text, err = prompt.render(name, vars)
    if not text then error(err) end
    return text
  end

  function ctx.job(code, extra)
    local j = { problem = ctx.problem_path, candidate = code, dtype = ctx.dtype,
      bench = { baselines = json.empty_array }, timeout = c.opts.job_timeout,
      profile = { metric_set = c.opts.metrics or "full" } }
    if ctx.sol_ms then j.sol_ms = ctx.sol_ms end
    for k, v in pairs(extra or {}) do j[k] = v end
    return j
  end

  function ctx.tokens()
    local u = ctx.usage
    return ctx.usage_base.tokens + u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_write_tokens
  end
  function ctx.cost() return ctx.usage_base.cost_usd + ctx.usage.cost_usd end

  -- chat(prompt_text, tag) -> result or nil, err. Each call is one user message with the role's
  -- prompt; the system prompt is shared so providers can cache it.
  function ctx.chat(text, tag)
    if not ctx.llm_enabled then return nil, "ENOTSUP: no LLM configured", "ENOTSUP" end
    local res, err, code = ctx.llm.chat({
      model = c.opts.model, system = ctx.system_prompt,
      messages = { { role = "user", content = text } },
      max_tokens = c.opts.max_tokens or 8192, temperature = c.opts.temperature, tag = tag,
    })
    local u = ctx.usage
    u.calls = u.calls + 1
    if res then
      local ru = res.usage or {}
      u.input_tokens = u.input_tokens + (ru.input_tokens or 0)
      u.output_tokens = u.output_tokens + (ru.output_tokens or 0)
      u.cache_read_tokens = u.cache_read_tokens + (ru.cache_read_tokens or 0)
      u.cache_write_tokens = u.cache_write_tokens + (ru.cache_write_tokens or 0)
      u.cost_usd = u.cost_usd + (res.cost_usd or 0)
      if res.text == nil then res.text = "" end
    else
      log.warn("LLM %s call failed: %s", tag or "?", tostring(err))
    end
    if ctx.progress then ctx.progress:update({ tokens = ctx.tokens(), cost_usd = ctx.cost() }) end
    return res, err, code
  end

  function ctx.extract_code(text)
    if not text then return nil end
    return ctx.llm.extract_code(text, "python")
  end

  function ctx.extract_json(text)
    if not text then return nil end
    return ctx.llm.extract_json(text)
  end

  return ctx
end

return M
