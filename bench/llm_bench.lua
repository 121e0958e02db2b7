-- Benchmark of kagent.llm.chat against the fake provider (tests/fixtures/fake_llm, a fake server
-- on loopback; its Python threads, not kagent-rt, are the usual limit at high call rates).
--   kagent-rt bench/llm_bench.lua [calls=200] [latency=1.0] [burst_calls=2000]
-- Prints: wall time of `calls` concurrent chats (one task each) at `latency` s per reply, calls/s,
-- and the runtime's own cost per call (CPU seconds of kagent-rt / calls, and wall − latency).
local fake = dofile(kagent.root .. "/tests/fixtures/fake_llm/fake.lua")
local llm, task = kagent.llm, kagent.task

local calls = tonumber(kagent.args[1]) or 200
local latency = tonumber(kagent.args[2]) or 1.0
local burst_calls = tonumber(kagent.args[3]) or 2000

local srv = fake.start{ script = { require_auth = false, default_text = "ok" } }
-- An OpenAI-compatible server at a local URL needs no key, so the bench needs no secret.
llm.configure{ model = "openai:fake-model", base_url = srv.url .. "/v1", concurrency = math.max(calls, 64),
               prices = { ["fake-model"] = { input = 0, output = 0 } } }

local function run(n, label)
  local fns = {}
  for i = 1, n do
    fns[i] = function()
      return assert(llm.chat{ messages = { { role = "user", content = label .. " call " .. i } }, max_tokens = 64 })
    end
  end
  local cpu0, t0 = os.clock(), kagent.time.now()
  local rs = task.all(fns)
  local wall, cpu = kagent.time.now() - t0, os.clock() - cpu0
  for _, r in ipairs(rs) do assert(r.ok, r[1]) end
  return wall, cpu
end

srv:set_script{ require_auth = false, latency = latency }
local wall, cpu = run(calls, "concurrent")
local st = srv:stats()
print(string.format("concurrent: %d calls, %d tasks, %.2f s latency per reply", calls, calls, latency))
print(string.format("  wall %.3f s  (%.1f calls/s)  server saw max %d at once", wall, calls / wall, st.max_concurrency))
print(string.format("  overhead: wall - latency = %.3f s for the batch; kagent-rt CPU %.3f ms per call",
  wall - latency, cpu / calls * 1000))

srv:set_script{ require_auth = false, latency = 0 }
llm.configure{ concurrency = 64 }
local bwall, bcpu = run(burst_calls, "burst")
print(string.format("throughput: %d calls, 0 s latency, 64 in flight", burst_calls))
print(string.format("  wall %.3f s  (%.1f calls/s)  kagent-rt CPU %.3f ms per call", bwall, burst_calls / bwall,
  bcpu / burst_calls * 1000))
local u = llm.usage()
print(string.format("usage: %d calls, %d input + %d output tokens, %d HTTP requests, %d retries",
  u.calls, u.input_tokens, u.output_tokens, u.http_requests, u.retries))
srv:stop()
