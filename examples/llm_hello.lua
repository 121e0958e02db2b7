-- One chat call with whatever provider the environment (or .env) configures.
--   ANTHROPIC_API_KEY=... kagent-rt examples/llm_hello.lua [provider:model]
local llm = kagent.llm
if kagent.args[1] then llm.configure{ model = kagent.args[1] } end

local ok, what = llm.configured()
if not ok then
  print("no LLM: " .. what)
  return 2
end

local r, err = llm.chat{
  system = "You answer in one short sentence.",
  messages = { { role = "user", content = "Why do GPU kernels coalesce memory accesses?" } },
  max_tokens = 200,
}
if not r then
  print(err)
  return 1
end
print(r.text)
print(string.format("%s  %d in / %d out tokens  $%.5f  %.2f s", what, r.usage.input_tokens,
  r.usage.output_tokens, r.cost_usd, r.latency))
