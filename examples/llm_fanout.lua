-- Fan-out: N workers ask for different ideas about the same kernel at once. The system prompt and
-- the kernel are a shared prefix (`cache = true`), so with Anthropic every worker after the first
-- reads it from the prompt cache.
--   kagent-rt examples/llm_fanout.lua [workers=4] [kernel.py]
local llm, task = kagent.llm, kagent.task
local n = tonumber(kagent.args[1]) or 4
local kernel = kagent.args[2] and kagent.fs.read(kagent.args[2])
  or "def rmsnorm(x, eps):\n    return x / (x.pow(2).mean(1, keepdim=True) + eps).sqrt()\n"

if not llm.configured() then
  print("no LLM: " .. select(2, llm.configured()))
  return 2
end

local fns = {}
for i = 1, n do
  fns[i] = function()
    return llm.chat{
      system = "You are a GPU performance engineer. Answer with one idea and a code block.",
      messages = {
        { role = "user", content = "Kernel:\n```python\n" .. kernel .. "```", cache = true },
        { role = "user", content = "Give optimization idea number " .. i .. " of " .. n .. "." },
      },
      max_tokens = 800,
    }
  end
end

for i, r in ipairs(task.all(fns)) do
  local res, err = r[1], r[2]
  if r.ok and res then
    print(string.format("--- worker %d (%.1f s, cache read %d tokens)", i, res.latency, res.usage.cache_read_tokens))
    print(res.text:sub(1, 300))
  else
    print(string.format("--- worker %d failed: %s", i, tostring(err or r[1])))
  end
end
local u = llm.usage()
print(string.format("total: %d calls, %d in, %d out, %d cache read, %d cache write tokens, $%.4f",
  u.calls, u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens, u.cost_usd))
